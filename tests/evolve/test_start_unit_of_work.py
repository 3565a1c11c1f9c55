"""Starting a run is one unit of work: a process SIGKILLed at any moment of
:meth:`Evolution.start` (after any transaction it committed, or inside one after any table's
rows) leaves either no run at all or a whole one (run row, seed, its evaluation, run state,
budget counter) that ``qdevolve resume`` finishes. Writing the run row, the budget counter or
the seed in separate transactions fails this test: the kill after the first commit leaves a
run without its seed.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import QDEVOLVE, write_example

ROOT = Path(__file__).resolve().parents[2]

KILL_SCRIPT = r'''
import os, signal, sys
from qdevolve.db.store import LineageStore
from qdevolve.evolve.core.engine import Evolution
from qdevolve.evolve.setup.example import load_example

db, example, point = sys.argv[1], sys.argv[2], sys.argv[3]
where, _, k = point.partition(":")
k = int(k or 0)
st = {"starting": False, "commits": 0, "inserts": 0}
orig_start, orig_begin, orig_insert = Evolution.start.__func__, LineageStore._begin, LineageStore._insert


def die():
    os.kill(os.getpid(), signal.SIGKILL)


class Begin:
    def __init__(self, cm):
        self.cm = cm

    def __enter__(self):
        return self.cm.__enter__()

    def __exit__(self, *exc):
        out = self.cm.__exit__(*exc)
        if st["starting"] and exc[0] is None:
            st["commits"] += 1
            if where == "after" and st["commits"] == k:
                die()  # this transaction committed; what the start writes next has not
        return out


def begin(self):
    return Begin(orig_begin(self))


def insert(self, c, mapper, items, ctx):
    orig_insert(self, c, mapper, items, ctx)
    if st["starting"] and items:
        st["inserts"] += 1
        if where == "in" and st["inserts"] == k:
            die()  # inside the open transaction, after this table's rows


def start(cls, *a, **kw):
    st["starting"] = True
    evo = orig_start(cls, *a, **kw)
    st["starting"] = False
    if where == "count":
        print("commits", st["commits"], "inserts", st["inserts"], flush=True)
    die()  # the start is done; the run itself has not begun


LineageStore._begin, LineageStore._insert, Evolution.start = begin, insert, classmethod(start)
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
    script = tmp_path / "kill_start.py"
    script.write_text(KILL_SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    r = subprocess.run([sys.executable, str(script), str(db), str(ex), point], env=env, capture_output=True,
                       text=True, timeout=120)
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
