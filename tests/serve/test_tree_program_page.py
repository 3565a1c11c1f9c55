"""The viewer's program page shows a program tree file by file, and its diff per file."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from qdevolve.db.store import open_store
from qdevolve.programtree import file_pairs

from .conftest import ROOT, Server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def tree_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path]]:
    db = tmp_path_factory.mktemp("serve-tree") / "tree.sqlite"
    proc = subprocess.run([sys.executable, "-m", "qdevolve", "run", str(ROOT / "examples" / "multi_file"),
                           "--iterations", "6", "--no-progress", "--db", str(db)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    s = Server(db)
    yield s, db
    s.stop()


def test_program_page_shows_each_file_and_a_diff_per_file(tree_run: tuple[Server, Path]) -> None:
    server, db = tree_run
    with open_store(db) as store:
        rows = list(store.iter_evaluated(store.latest_run_id()))
    seed = next(p for _, p, _ in rows if p.generation == 0)
    child = next(p for _, p, _ in rows if p.generation == 1)
    status, _, body = server.get(f"/programs/{child.id}")
    html = body.decode()
    assert status == 200
    assert '<h3 class="file-path">heuristics.py</h3>' in html and '<h3 class="file-path">main.py  (main)</h3>' in html
    assert "# qdevolve program tree v1" not in html and "# --- file:" not in html
    changed = [p for p, a, b in file_pairs(seed.code, child.code) if a != b]
    parent = child.parent_ids[0][:12]
    for path in changed:
        assert f"parent {parent}/{path}" in html
