"""A ShinkaEvolve evaluator that imports the real ``shinka`` package (``shinka-evolve``)
runs inside qdevolve's sandboxes: ``from shinka.core import run_shinka_eval`` writes
``metrics.json`` / ``correct.json`` and qdevolve reads them back.

``shinka-evolve`` 0.0.7 pins ``httpx==0.27`` and, through its ~50 dependencies, older
``openai``, ``rich``, ``pillow`` and ``python-dateutil`` than qdevolve's environment has, so
it is not installed next to qdevolve by default. The test runs ``qdevolve`` under an
interpreter that can import both packages: the current one when ``shinka`` imports here,
else ``$QDEVOLVE_SHINKA_PYTHON`` (e.g. a separate venv with ``pip install shinka-evolve``
whose ``.pth`` file adds qdevolve's site-packages after its own; see docs/shinka.md). It is
skipped, with the reason, when neither is available.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import SEED, write

ROOT = Path(__file__).resolve().parents[2]

# ShinkaEvolve's own evaluator pattern (examples/circle_packing/evaluate.py): run_shinka_eval
# loads the program, calls its experiment function num_runs times, validates, aggregates and
# writes metrics.json / correct.json into results_dir.
EVALUATE = '''from shinka.core import run_shinka_eval


def no_kwargs(run_index):
    return {}  # values() takes no arguments (run_shinka_eval passes a seed by default)


def validate(result):
    ok = all(isinstance(v, float) for v in result)
    return ok, None if ok else "values() must return floats"


def aggregate(results):
    a, b, c = results[0]
    score = 1.0 / (1.0 + (a - 3) ** 2 + (b + 1) ** 2 + (c - 2) ** 2)
    return {"combined_score": score, "public": {"spread": abs(a - b)}, "private": {"runs": len(results)},
            "text_feedback": f"a={a:.3f}"}


def main(program_path, results_dir):
    metrics, correct, error = run_shinka_eval(
        program_path=program_path, results_dir=results_dir, experiment_fn_name="values", num_runs=2,
        get_experiment_kwargs=no_kwargs, validate_fn=validate, aggregate_metrics_fn=aggregate)
    return metrics
'''


def _shinka_python() -> tuple[str | None, str]:
    """An interpreter that imports ``shinka.core`` and this checkout's ``qdevolve``, and why not."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    tried = []
    for exe in filter(None, [sys.executable, os.environ.get("QDEVOLVE_SHINKA_PYTHON")]):
        r = subprocess.run([exe, "-c", "import shinka.core, qdevolve"], capture_output=True, text=True,
                           timeout=120, env=env)
        if r.returncode == 0:
            return exe, ""
        last = (r.stderr.strip().splitlines() or ["?"])[-1]
        tried.append(f"{exe}: {last}")
    return None, ("shinka-evolve is not importable (" + "; ".join(tried) + "); install it (pip install "
                  "'qdevolve[shinka]') or point QDEVOLVE_SHINKA_PYTHON at an interpreter that has it")


@pytest.fixture(scope="module")
def shinka_python() -> str:
    exe, why = _shinka_python()
    if exe is None:
        pytest.skip(why)
    return exe


@pytest.mark.slow
@pytest.mark.parametrize("sandbox", ["local", "bwrap"])
def test_run_shinka_eval_inside_the_sandbox(tmp_path: Path, shinka_python: str, sandbox: str) -> None:
    if sandbox == "bwrap":
        from qdevolve.sandbox.bwrap import bwrap_available

        if not bwrap_available():
            pytest.skip("bwrap is not usable on this machine")
    ex = write(tmp_path / "shinka_pkg", {"initial.py": SEED, "evaluate.py": EVALUATE})
    db = tmp_path / "s.sqlite"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    r = subprocess.run([shinka_python, "-m", "qdevolve", "run", str(ex), "--db", str(db), "--iterations", "6",
                        "--sandbox", sandbox, "--mutation", "ast", "--no-progress"],
                       capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    con = sqlite3.connect(db)
    rows = con.execute("SELECT e.status, e.score, e.metrics, e.artifacts, e.sandbox FROM evaluations e "
                       "JOIN programs p ON p.id = e.program_id ORDER BY p.seq").fetchall()
    assert len(rows) == 7 and {row[4] for row in rows} == {sandbox}
    status, score, metrics, artifacts, _ = rows[0]
    assert status == "ok"
    assert score == pytest.approx(1.0 / (1.0 + 2.5 ** 2 + 3.0 ** 2 + 1.0 ** 2))  # the seed: (0.5, 2.0, 1.0)
    assert json.loads(metrics)["spread"] == pytest.approx(1.5)
    art = json.loads(artifacts)
    assert art.get("private.runs") == "2", art  # run_shinka_eval called values() twice
    assert "Metrics saved to" in art.get("stdout", ""), "shinka's own messages, captured"
    assert any(row[0] == "ok" and row[1] != score for row in rows[1:]), "children were scored too"
