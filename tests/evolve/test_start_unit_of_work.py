"""Starting a run is one unit of work: a process SIGKILLed at any moment of
:meth:`Evolution.start` (after any transaction it committed, or inside one after any table's
rows) leaves either no run at all or a whole one (run row, seed, its evaluation, run state,
budget counter) that ``qdevolve resume`` finishes. Writing the run row, the budget counter or
the seed in separate transactions fails this test: the kill after the first commit leaves a
run without its seed.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest

from ._kill import run_script
from .conftest import QDEVOLVE, write_example

KILL_SCRIPT = r'''
from qdevolve.evolve.core.engine import Evolution
from qdevolve.evolve.setup.example import load_example

db, example = sys.argv[1], sys.argv[2]
orig_start = Evolution.start.__func__


def start(cls, *a, **kw):
    st["window"] = True
    orig_start(cls, *a, **kw)
    st["window"] = False
    if where == "count":
        print("commits", st["commits"], "inserts", st["inserts"], flush=True)
    die()  # the start is done; the run itself has not begun


Evolution.start = classmethod(start)
store = LineageStore(db)
ex = load_example(example)
Evolution.start(ex, ex.config, store, progress=False).run()
'''

TABLES = ("runs", "programs", "evaluations", "archive_events", "run_state", "plugin_files")


def _rows(db: Path) -> dict[str, int]:
    con = sqlite3.connect(db)
    try:
        return {t: con.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in TABLES}
    finally:
        con.close()


def _kill(tmp_path: Path, db: Path, ex: Path, point: str) -> subprocess.CompletedProcess[str]:
    r = run_script(tmp_path / "kill_start.py", KILL_SCRIPT, [str(db), str(ex)], point, timeout=120)
    assert r.returncode == -signal.SIGKILL, (point, r.stderr[-3000:])
    return r


@pytest.mark.slow
def test_a_start_killed_anywhere_leaves_no_run_or_a_whole_one(tmp_path: Path) -> None:
    ex = write_example(tmp_path / "ex")
    probe = _kill(tmp_path, tmp_path / "probe.sqlite", ex, "count").stdout.split()
    commits, inserts = int(probe[1]), int(probe[3])
    assert commits >= 1 and inserts >= 2, probe  # the seed's program and evaluation rows at least
    points = [f"in:{k}" for k in range(1, inserts + 1)] + [f"after:{k}" for k in range(1, commits + 1)]
    whole = 0
    for point in points:
        db = tmp_path / f"start-{point.replace(':', '-')}.sqlite"
        _kill(tmp_path, db, ex, point)
        rows = _rows(db)
        if rows["runs"] == 0:
            assert set(rows.values()) == {0}, f"killed at {point}: no run, yet rows were left: {rows}"
            continue
        whole += 1
        assert rows["runs"] == 1 and rows["programs"] == rows["evaluations"] == 1, (point, rows)
        con = sqlite3.connect(db)
        try:  # the run state the seed left, the budget asked for and the budget counter
            keys = {k for (k,) in con.execute("SELECT key FROM run_state")}
        finally:
            con.close()
        assert {"rng", "counters", "budget", "budget.stored"} <= keys, (point, keys)
        r = subprocess.run([*QDEVOLVE, "resume", "--db", str(db), "--no-progress"], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, (point, r.stderr[-3000:])
        con = sqlite3.connect(db)
        try:
            assert con.execute("SELECT status FROM runs").fetchone()[0] == "finished", point
            assert con.execute("SELECT COUNT(*) FROM programs WHERE operator = 'seed'").fetchone()[0] == 1, point
            assert con.execute("SELECT COUNT(*) FROM programs").fetchone()[0] == 12 + 1, point
        finally:
            con.close()
    assert whole == commits, "only a kill after the start's commit(s) leaves a run"
