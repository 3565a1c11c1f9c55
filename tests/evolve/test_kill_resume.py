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
            cmd = [*QDEVOLVE, "run", str(ex), "--sandbox", "local", "--db", str(db), "--iterations", str(BUDGET), "--no-progress"]
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


KILL_SCRIPT = r'''
import os, signal, sys
from qdevolve.db.store import LineageStore
from qdevolve.evolve.core.engine import Evolution

db, url, step, example, start = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5] == "start"
TARGET = 2 if start else 3  # the 2nd child of a new run (its start stores the seed), the 3rd of a resume
state = {"n": 0, "active": False, "inserts": 0}


def die():
    os.kill(os.getpid(), signal.SIGKILL)


orig_tell, orig_write, orig_insert = Evolution.tell, LineageStore.write, LineageStore._insert


def tell(self, *a, **k):
    state["n"] += 1
    state["active"] = state["n"] == TARGET
    out = orig_tell(self, *a, **k)
    if state["active"]:
        die()  # step "after": the transaction committed, the ledger not yet saved anywhere else
    return out


def write(self, *a, **k):
    if state["active"] and step == "before":
        die()
    return orig_write(self, *a, **k)


def insert(self, c, mapper, items, ctx):
    orig_insert(self, c, mapper, items, ctx)
    if state["active"] and items:
        state["inserts"] += 1
        if step == str(state["inserts"]):
            die()  # inside the open transaction, after this table's rows


Evolution.tell, LineageStore.write, LineageStore._insert = tell, write, insert
store = LineageStore(db)
if start:
    from qdevolve.evolve.setup.example import load_example
    ex = load_example(example)
    cfg = ex.config.with_overrides(iterations=12, workers=1, seed=3, mutation=[{"type": "rewrite"}],
                                   backend={"type": "openai", "api_base": url, "model": "scripted"})
    evo = Evolution.start(ex, cfg, store, progress=False)
else:
    evo = Evolution.resume(store, store.latest_run_id(), progress=False)
evo.run()
'''


def _consistent(db: Path) -> tuple[int, int]:
    """Nothing half-written: every program has its evaluation, every rollout its reward."""
    con = sqlite3.connect(db)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        n_prog = con.execute("SELECT COUNT(*) FROM programs").fetchone()[0]
        assert con.execute("SELECT COUNT(*) FROM programs p WHERE NOT EXISTS "
                           "(SELECT 1 FROM evaluations e WHERE e.program_id = p.id)").fetchone()[0] == 0
        assert con.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0] == n_prog
        n_roll = con.execute("SELECT COUNT(*) FROM rollouts").fetchone()[0]
        assert n_roll == n_prog - 1, "one rollout per child, stored with it"
        assert con.execute("SELECT COUNT(*) FROM rollouts WHERE reward IS NULL AND program_id IN "
                           "(SELECT program_id FROM evaluations WHERE status = 'ok')").fetchone()[0] == 0
        assert con.execute("SELECT COUNT(*) FROM rollouts r WHERE NOT EXISTS "
                           "(SELECT 1 FROM programs p WHERE p.id = r.program_id)").fetchone()[0] == 0
        return n_prog, n_roll
    finally:
        con.close()


@pytest.mark.slow
def test_kill_at_every_step_of_tell_leaves_nothing_to_repair(tmp_path: Path) -> None:
    """SIGKILL before ``tell``'s write, after each table's rows inside its transaction, and
    after the commit: the database holds whole children only, and resume (which has no
    repair pass) finishes the exact budget with one evaluation and one rewarded rollout each."""
    import sys

    from qdevolve.testing.scripted_server import ScriptedServer
    from qdevolve.testing.scripts import ScriptedModel

    ex = write_example(tmp_path / "ex")
    db = tmp_path / "tell.sqlite"
    script = tmp_path / "kill_in_tell.py"
    script.write_text(KILL_SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[2]),
                                                                     os.environ.get("PYTHONPATH")]))}
    with ScriptedServer(ScriptedModel(seed=0)) as server:
        before = 0
        for i, step in enumerate(["before", "1", "2", "3", "4", "after"]):
            proc = subprocess.run([sys.executable, str(script), str(db), server.url, step, str(ex),
                                   "start" if i == 0 else "resume"], env=env, capture_output=True, text=True,
                                  timeout=120)
            assert proc.returncode == -signal.SIGKILL, (step, proc.stderr[-2000:])
            n_prog, _ = _consistent(db)
            assert n_prog > before or i == 0, f"each process told at least one child before the kill ({step})"
            before = n_prog
        r = subprocess.run([*QDEVOLVE, "resume", "--db", str(db), "--no-progress", "--trust", "backend.api_base"],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr[-2000:]
    n_prog, n_roll = _consistent(db)
    assert n_prog == 12 + 1 and n_roll == 12
    con = sqlite3.connect(db)
    assert con.execute("SELECT status FROM runs").fetchone()[0] == "finished"
    assert con.execute("SELECT COUNT(*) FROM evaluations WHERE worker LIKE 'local:%'").fetchone()[0] >= 12
