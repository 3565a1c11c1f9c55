"""Taking a pool migrant is one unit of work: the claim, the taker's ``migrated`` archive events
and its ``migration`` state commit together.

Run A of a pool publishes migrants; run B is SIGKILLed while it picks them up: inside the
take's transaction right after the claim, and after each transaction it committed. Then no
claim exists without its delivery (the taker's ``migration`` state lists every migrant it
claimed, and its events only those), and a resumed B takes every migrant exactly once.
Claiming in a transaction of its own fails this test: the kill after that commit leaves a
migrant claimed by B and delivered nowhere.
"""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.scale._example import write_example

from ._kill import run_script

POOL = "uow-pool"

SCRIPT = r'''
from qdevolve.db import claims
from qdevolve.evolve.core.engine import Evolution

db, run_b = sys.argv[1], sys.argv[2]
orig_claim = claims.claim_program


def claim(*a, **kw):
    ours = orig_claim(*a, **kw)
    if st["window"] and ours and where == "claim":
        die()  # the claim is made; what it implies is not written yet
    return ours


claims.claim_program = claim
store = LineageStore(db, create=False)
evo = Evolution.resume(store, run_b, progress=False)
st["window"] = True
evo.migration.pick_up()
st["window"] = False
print("commits", st["commits"], "received", len(evo.migration.received), flush=True)
evo.close()
'''


def _setup(tmp_path: Path) -> tuple[Path, str, str]:
    """A pool database: run A ran its 12 children (publishing a migrant every 2), run B started."""
    from qdevolve.db.store import LineageStore
    from qdevolve.evolve.core.engine import Evolution
    from qdevolve.evolve.setup.example import load_example

    db = tmp_path / "pool.sqlite"
    store = LineageStore(db, create=True)
    evos = []
    for i in range(2):
        ex = load_example(write_example(tmp_path / f"c{i}", iterations=12, sleep=0.0, seed=i))
        cfg = ex.config.with_overrides(budget_pool=POOL, pool_migration={"interval": 2, "count": 1}, workers=1,
                                       iterations=12, name=f"island{i}")
        evos.append(Evolution.start(ex, cfg, store, progress=False))
    a, b = evos
    a.run()
    for evo in evos:
        evo.close()
    store.close()
    return db, a.run_id, b.run_id


def _run(tmp_path: Path, db: Path, run_b: str, point: str) -> subprocess.CompletedProcess[str]:
    return run_script(tmp_path / "take.py", SCRIPT, [str(db), run_b], point, timeout=120)


def _taken(db: Path, run_a: str, run_b: str) -> tuple[dict[str, str], list[str], list[str], list[str]]:
    """Claims (program -> taker), B's received and skipped ids, and B's migrated events' programs."""
    con = sqlite3.connect(db)
    try:
        claims = {k.split("/", 1)[1]: json.loads(v)["controller"] for k, v in con.execute(
            "SELECT key, value FROM run_state WHERE run_id = ? AND key LIKE 'claim/%'", (f"pool:{POOL}",))}
        row = con.execute("SELECT value FROM run_state WHERE run_id = ? AND key = 'migration'", (run_b,)).fetchone()
        state = json.loads(row[0]) if row else {}
        events = [pid for (pid,) in con.execute(
            "SELECT program_id FROM archive_events WHERE run_id = ? AND kind = 'migrated' ORDER BY id", (run_b,))]
    finally:
        con.close()
    return claims, list(state.get("received", [])), list(state.get("skipped", [])), events


@pytest.mark.slow
def test_a_take_killed_anywhere_leaves_no_claim_without_its_delivery(tmp_path: Path) -> None:
    db, run_a, run_b = _setup(tmp_path)
    probe_db = tmp_path / "probe.sqlite"
    shutil.copy(db, probe_db)
    probe = _run(tmp_path, probe_db, run_b, "none")
    assert probe.returncode == 0, probe.stderr[-3000:]
    out = probe.stdout.split()
    commits, received = int(out[1]), int(out[3])
    claimed, got, skipped, _ = _taken(probe_db, run_a, run_b)
    assert received >= 2 and len(claimed) == len(got) + len(skipped) >= 3, (out, claimed)
    for point in ["claim"] + [f"after:{k}" for k in range(1, commits + 1)]:
        cut = tmp_path / f"cut-{point.replace(':', '-')}.sqlite"
        shutil.copy(db, cut)
        r = _run(tmp_path, cut, run_b, point)
        assert r.returncode == -signal.SIGKILL, (point, r.stdout, r.stderr[-3000:])
        claimed, got, skipped, events = _taken(cut, run_a, run_b)
        assert set(claimed) == set(got) | set(skipped), f"killed at {point}: a claim without its delivery"
        assert all(claimed[pid] == run_b for pid in claimed), point
        assert set(events) <= set(got) and len(events) == len(set(events)), point
        r = _run(tmp_path, cut, run_b, "none")  # B resumes and picks up the rest
        assert r.returncode == 0, (point, r.stderr[-3000:])
        claimed, got, skipped, events = _taken(cut, run_a, run_b)
        assert (sorted(got), sorted(skipped)) == (sorted(_taken(probe_db, run_a, run_b)[1]),
                                                  sorted(_taken(probe_db, run_a, run_b)[2])), point
        assert len(got) == len(set(got)) and set(claimed) == set(got) | set(skipped), point
        assert len(events) == len(set(events)), f"killed at {point}: a migrant delivered twice"
