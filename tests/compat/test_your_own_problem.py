"""docs/your-own-problem.md walks: its snippets are the bin-packing example, and the example
built from them alone in an empty directory runs offline to an improvement over its seed.

The evaluator reads ``instances.json`` beside itself (``Path(__file__).parent``), so the run
needs the sandbox to carry the evaluator's directory; it is run on the ``local`` backend and
on the default one.
"""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "your-own-problem.md"
EXAMPLE = ROOT / "examples" / "bin_packing"
SNIPPET = re.compile(r"```(\w+) file=(\S+)\n(.*?)```", re.S)


def snippets() -> dict[str, str]:
    """``{file name: text}`` of the page's code blocks marked ``file=NAME``."""
    return {name: text for _lang, name, text in SNIPPET.findall(PAGE.read_text(encoding="utf-8"))}


def test_the_page_is_linked_from_the_readme_first_screen() -> None:
    first_screen = "\n".join((ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:40])
    assert "docs/your-own-problem.md" in first_screen


def test_page_snippets_are_the_shipped_example() -> None:
    found = snippets()
    assert set(found) == {"initial_program.py", "make_instances.py", "evaluator.py", "config.yaml"}
    for name, text in found.items():
        assert text == (EXAMPLE / name).read_text(encoding="utf-8"), f"{name} differs from examples/bin_packing"
    built = subprocess.run([sys.executable, str(EXAMPLE / "make_instances.py")], capture_output=True, text=True,
                           check=True).stdout
    assert built == (EXAMPLE / "instances.json").read_text(encoding="utf-8")


def test_page_documents_every_key_of_the_contract() -> None:
    text = PAGE.read_text(encoding="utf-8")
    for key in ("combined_score", "tests", "features", "artifacts", "error", "evaluate_stage1", "evaluate_stage2",
                "cascade_thresholds", "qdevolve sandbox exec", "Path(__file__).parent"):
        assert key in text, key
    from qdevolve.sandbox.runner import _RESERVED

    assert all(f"`{k}`" in text for k in _RESERVED)


def _build(root: Path) -> Path:
    ex = root / "bin_packing"
    ex.mkdir()
    for name, text in snippets().items():
        (ex / name).write_text(text, encoding="utf-8")
    data = subprocess.run([sys.executable, "make_instances.py"], cwd=ex, capture_output=True, text=True, check=True)
    (ex / "instances.json").write_text(data.stdout, encoding="utf-8")
    return ex


@pytest.mark.slow
@pytest.mark.parametrize("sandbox", ["local", "default"])
def test_example_built_from_the_page_improves_on_its_seed(sandbox: str, tmp_path: Path) -> None:
    ex = _build(tmp_path)
    db = tmp_path / "bp.sqlite"
    extra = ["--sandbox", "local"] if sandbox == "local" else []
    r = subprocess.run([sys.executable, "-m", "qdevolve", "run", str(ex), "--db", str(db), "--iterations", "64", "--seed", "2",
                        "--no-progress", *extra], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    con = sqlite3.connect(db)
    try:
        seed = con.execute("SELECT e.score FROM evaluations e JOIN programs p ON p.id = e.program_id "
                           "WHERE p.operator = 'seed'").fetchone()[0]
        best = con.execute("SELECT MAX(score) FROM evaluations WHERE status = 'ok'").fetchone()[0]
        features = con.execute("SELECT COUNT(*) FROM archive_events").fetchone()[0]
    finally:
        con.close()
    assert 0.8 < seed < 0.9
    assert best > seed + 0.01, (seed, best)
    assert features > 1
