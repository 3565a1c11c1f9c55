"""A real ``qdevolve run`` subprocess SIGKILLed at random moments resumes to the exact budget."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from .conftest import CONFIG, QDEVOLVE, write_example

BUDGET = 300


def _children(db: Path) -> int:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return con.execute("SELECT COUNT(*) FROM programs").fetchone()[0] - 1
        finally:
            con.close()
    except sqlite3.Error:
        return -1


@pytest.mark.slow
def test_sigkill_five_times_then_resume(tmp_path: Path) -> None:
    """Kills land at random points of progress (not of time), so the test is speed-independent."""
    ex = write_example(tmp_path / "ex", config=CONFIG.replace("workers: 1", "workers: 2"))
    db = tmp_path / "kill.sqlite"
    rng = random.Random(1234)
    kills = 0
    for attempt in range(5):
        if attempt == 0:
            cmd = [*QDEVOLVE, "run", str(ex), "--db", str(db), "--iterations", str(BUDGET), "--no-progress"]
        else:
            cmd = [*QDEVOLVE, "resume", "--db", str(db), "--no-progress"]
        before = max(_children(db), 0)
        target = before + rng.randint(5, 40)
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        deadline = time.time() + 120
        while proc.poll() is None and time.time() < deadline and _children(db) < target:
            time.sleep(rng.uniform(0.005, 0.05))
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            kills += 1
        proc.wait(timeout=30)
    assert kills == 5, "every attempt was killed mid-run"
    r = subprocess.run([*QDEVOLVE, "resume", "--db", str(db), "--no-progress"], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    n_prog = con.execute("SELECT COUNT(*) FROM programs").fetchone()[0]
    assert n_prog == BUDGET + 1
    assert con.execute("SELECT COUNT(DISTINCT id) FROM programs").fetchone()[0] == n_prog
    # exactly one evaluation per program: nothing evaluated twice, nothing left out
    assert con.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0] == n_prog
    assert con.execute("SELECT COUNT(DISTINCT program_id) FROM evaluations").fetchone()[0] == n_prog
    orphans = con.execute("SELECT COUNT(*) FROM programs p WHERE p.operator != 'seed' AND NOT EXISTS "
                          "(SELECT 1 FROM edges e WHERE e.child_id = p.id)").fetchone()[0]
    assert orphans == 0
    dangling = con.execute("SELECT COUNT(*) FROM edges e WHERE NOT EXISTS "
                           "(SELECT 1 FROM programs p WHERE p.id = e.parent_id)").fetchone()[0]
    assert dangling == 0
    assert con.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1
    assert con.execute("SELECT status FROM runs").fetchone()[0] == "finished"
