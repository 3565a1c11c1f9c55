"""Fail fast and say why: a run whose first children all fail alike, or whose model server
cannot be reached, stops with exit 1 and one line, stays resumable, and keeps what it stored."""

from __future__ import annotations

import socket
import sqlite3
import subprocess
from pathlib import Path

import pytest

from .conftest import QDEVOLVE, SEED, write_example

# The seed passes; any child (any change to its text) fails with the same error.
PICKY_EVALUATOR = f"""import importlib.util

SEED = {SEED!r}


def evaluate(program_path):
    with open(program_path, encoding="utf-8") as fh:
        if fh.read() != SEED:
            raise RuntimeError("the scorer's reference file 3 is missing")
    spec = importlib.util.spec_from_file_location("cand", program_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return {{"combined_score": float(mod.value()), "features": {{"a": float(mod.A), "b": float(mod.B)}}}}
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_first_children_failing_alike_stop_the_run(tmp_path: Path) -> None:
    ex = write_example(tmp_path / "picky", seed=SEED, evaluator=PICKY_EVALUATOR)
    db = tmp_path / "p.sqlite"
    r = subprocess.run([*QDEVOLVE, "run", str(ex), "--sandbox", "local", "--db", str(db), "--iterations", "40", "--no-progress",
                        "--workers", "1"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    line = [x for x in r.stderr.splitlines() if "children all failed the same way" in x]
    assert line and "reference file" in line[0] and "resume" in line[0], r.stderr
    con = sqlite3.connect(db)
    assert con.execute("SELECT status FROM runs").fetchone()[0] == "stopped"
    n = con.execute("SELECT COUNT(*) FROM programs WHERE operator != 'seed'").fetchone()[0]
    assert 5 <= n < 40
    # a run told not to fail fast goes on to its budget
    db2 = tmp_path / "p2.sqlite"
    r = subprocess.run([*QDEVOLVE, "run", str(ex), "--sandbox", "local", "--db", str(db2), "--iterations", "8", "--no-progress",
                        "--workers", "1", "--fail-fast-children", "0"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr


@pytest.mark.slow
def test_unreachable_model_server_stops_with_one_line(tmp_path: Path) -> None:
    ex = write_example(tmp_path / "tiny")
    db = tmp_path / "u.sqlite"
    port = _free_port()  # nothing listens there
    r = subprocess.run([*QDEVOLVE, "run", str(ex), "--sandbox", "local", "--db", str(db), "--iterations", "30", "--no-progress",
                        "--backend", "openai", "--model", "m", "--api-base",
                        f"http://user:secret@127.0.0.1:{port}/v1"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    assert f"127.0.0.1:{port}" in r.stderr and "secret" not in r.stderr
    con = sqlite3.connect(db)
    assert con.execute("SELECT status FROM runs").fetchone()[0] == "stopped"
    assert con.execute("SELECT COUNT(*) FROM programs WHERE operator != 'seed'").fetchone()[0] < 30
