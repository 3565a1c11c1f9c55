"""``resume`` and ``--plugin`` files: a changed file warns, a moved one is named with the way
on (``resume --plugin NEW_PATH``), and ``resume --plugin`` records where the file is now."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest

from qdevolve.evolve.setup.plugin_files import current_plugin_files

from .conftest import QDEVOLVE
from .test_plugins_in_runs import MUTATION_PLUGIN


def _row(i: int, path: str, sha: str, names: list[list[str]]) -> dict:
    return {"id": i, "path": path, "sha256": sha, "names": json.dumps(names)}


def test_a_later_record_replaces_the_file_it_stands_for() -> None:
    rows = [_row(1, "/a/my_plugins.py", "1" * 64, [["mutation", "scale"]]),
            _row(2, "/a/other.py", "2" * 64, [["selection", "soft"]]),
            _row(3, "/b/renamed.py", "3" * 64, [["mutation", "scale"]])]  # moved and renamed
    assert [r["id"] for r in current_plugin_files(rows)] == [2, 3]
    rows.append(_row(4, "/c/other.py", "4" * 64, []))  # same file name
    assert [r["id"] for r in current_plugin_files(rows)] == [3, 4]


def _qd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*QDEVOLVE, *args], capture_output=True, text=True, timeout=180)


def _count(db: Path) -> int:
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT COUNT(*) FROM programs").fetchone()[0]
    finally:
        con.close()


@pytest.mark.slow
def test_resume_warns_on_a_changed_plugin_and_finds_a_moved_one(tiny_example: Path, tmp_path: Path) -> None:
    plugin = tmp_path / "my_plugins.py"
    plugin.write_text(MUTATION_PLUGIN)
    db = tmp_path / "p.sqlite"
    r = _qd("run", str(tiny_example), "--db", str(db), "--iterations", "4", "--mutation", "scale_constants",
            "--plugin", str(plugin), "--no-progress", "--sandbox", "local")
    assert r.returncode == 0, r.stderr
    # unchanged: no warning
    r = _qd("resume", "--db", str(db), "--iterations", "5", "--trust", "plugins", "--no-progress")
    assert r.returncode == 0, r.stderr
    assert "warning" not in r.stderr
    # edited: a warning naming the file and both hashes, and the run goes on with the new code
    plugin.write_text(MUTATION_PLUGIN + "\n# tuned\n")
    r = _qd("resume", "--db", str(db), "--iterations", "6", "--trust", "plugins", "--no-progress")
    assert r.returncode == 0, r.stderr
    warning = " ".join(r.stderr.split())
    assert "warning:" in warning and "my_plugins.py" in warning and "changed" in warning and "->" in warning
    assert _count(db) == 7
    # moved: an error naming the recorded path and the option, nothing evaluated
    moved = tmp_path / "elsewhere" / "my_plugins.py"
    moved.parent.mkdir()
    plugin.rename(moved)
    r = _qd("resume", "--db", str(db), "--iterations", "8", "--trust", "plugins", "--no-progress")
    assert r.returncode == 2
    error = " ".join(r.stderr.split())
    assert str(plugin) in error and "resume --plugin" in error
    assert _count(db) == 7
    # resume --plugin NEW_PATH goes on, and records the new place for later resumes
    r = _qd("resume", "--db", str(db), "--iterations", "8", "--plugin", str(moved), "--no-progress")
    assert r.returncode == 0, r.stderr
    assert "warning" not in r.stderr
    assert _count(db) == 9
    # without --trust plugins a recorded file is not imported from the database's path
    r = _qd("resume", "--db", str(db), "--iterations", "9", "--no-progress")
    assert r.returncode == 2 and "--trust plugins" in " ".join(r.stderr.split())
    assert _count(db) == 9
    r = _qd("resume", "--db", str(db), "--iterations", "9", "--trust", "plugins", "--no-progress")
    assert r.returncode == 0, r.stderr
    assert _count(db) == 10
