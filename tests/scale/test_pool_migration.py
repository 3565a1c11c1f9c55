"""Islands on two controllers, one PostgreSQL database: migration goes through the database.

Two ``qdevolve run --budget-pool NAME`` controllers with ``run.pool_migration`` publish
their best elites as the pool's migrant rows and claim what the other published: every
migrant is taken by exactly one controller (never its publisher), lands in the taker's
archive as a ``migrated`` event that references the publisher's program, and the budget is
still counted once (no double counting, no lost program, one evaluation per program).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from qdevolve.errors import ConfigError
from qdevolve.evolve.setup.config import RunConfig
from tests.scale._example import write_example


@pytest.mark.slow
@pytest.mark.postgres
def test_two_controllers_exchange_migrants_through_postgres(pg_url: str, tmp_path: Path) -> None:
    pool, total = f"mig-{uuid.uuid4().hex[:8]}", 40
    procs = []
    for i in range(2):
        example = write_example(tmp_path / f"c{i}", iterations=total, sleep=0.5, seed=i,
                                extra="  pool_migration: {interval: 2, count: 1}\n")
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "qdevolve", "run", str(example), "--sandbox", "local", "--db", pg_url, "--budget-pool", pool,
             "--trust", "run.pool_migration", "--name", f"{pool}-island{i}", "--no-progress"],
            cwd=tmp_path, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env={**os.environ, "COLUMNS": "200"}))
    for p in procs:
        _out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]
    eng = create_engine(pg_url)
    with eng.connect() as c:
        runs = {r.name: r.id for r in c.execute(text("SELECT id, name FROM runs WHERE name LIKE :n"),
                                                {"n": f"{pool}-island%"})}
        a, b = runs[f"{pool}-island0"], runs[f"{pool}-island1"]
        children = [c.execute(text("SELECT COUNT(*) FROM programs WHERE run_id = :r AND operator != 'seed'"),
                              {"r": r}).scalar() for r in (a, b)]
        assert sum(children) == total, children  # migrants are not children: the pool is counted once
        per_program = c.execute(text(
            "SELECT p.id, COUNT(e.program_id) FROM programs p LEFT JOIN evaluations e ON e.program_id = p.id "
            "WHERE p.run_id IN (:a, :b) GROUP BY p.id"), {"a": a, "b": b}).all()
        assert per_program and all(n == 1 for _pid, n in per_program)  # none lost, none evaluated twice
        rows = c.execute(text("SELECT key, value FROM run_state WHERE run_id = :p"), {"p": f"pool:{pool}"}).all()
        migrants = {k.split("/", 1)[1]: json.loads(v) for k, v in rows if k.startswith("migrant/")}
        takers = {k.split("/", 1)[1]: json.loads(v)["controller"] for k, v in rows if k.startswith("claim/")}
        assert {m["from_run"] for m in migrants.values()} == {a, b}, migrants  # both published
        for pid, taker in takers.items():
            assert migrants[pid]["from_run"] != taker  # never taken back by its publisher
        crossed = c.execute(text(
            "SELECT ev.run_id, p.run_id, ev.program_id, ev.data FROM archive_events ev "
            "JOIN programs p ON p.id = ev.program_id WHERE ev.kind = 'migrated' AND ev.run_id IN (:a, :b)"),
            {"a": a, "b": b}).all()
        directions = {(to, src) for to, src, _pid, _d in crossed}
        assert directions == {(a, b), (b, a)}, directions  # migrants observed crossing both ways
        for to, src, pid, data in crossed:
            assert takers[pid] == to and json.loads(data)["from_run"] == src
        states = {r: json.loads(c.execute(text("SELECT value FROM run_state WHERE run_id = :r AND key = 'migration'"),
                                          {"r": r}).scalar()) for r in (a, b)}
        got_a = set(states[a]["received"]) | set(states[a]["skipped"])
        got_b = set(states[b]["received"]) | set(states[b]["skipped"])
        assert not got_a & got_b  # each migrant delivered once
        assert got_a | got_b == set(takers), (got_a, got_b, takers)  # every claim delivered: nothing lost
        counter = c.execute(text("SELECT value FROM run_state WHERE run_id = :p AND key = 'budget.stored'"),
                            {"p": f"pool:{pool}"}).scalar()
        assert counter == str(total)
    eng.dispose()


def test_pool_migration_config_is_checked() -> None:
    RunConfig(budget_pool="p", pool_migration={"interval": 3, "count": 1})
    with pytest.raises(ConfigError, match="pool_migration.interval"):
        RunConfig(budget_pool="p", pool_migration={"interval": 0})
    with pytest.raises(ConfigError, match="keys interval, count"):
        RunConfig(budget_pool="p", pool_migration={"every": 3})


def test_a_claimed_migrant_is_delivered_on_resume_and_replayed(tmp_path: Path) -> None:
    """A controller killed between its claim and its event write finds its own claim on
    resume and delivers the migrant then; received migrants are back in the archive after
    a resume (in process, on one SQLite file: the pool rows work the same there)."""
    from qdevolve.archive.islands_pool import migrants_of
    from qdevolve.db import claims
    from qdevolve.db.store import LineageStore
    from qdevolve.evolve.core.engine import Evolution
    from qdevolve.evolve.setup.example import load_example

    pool = "resume-pool"
    store = LineageStore(tmp_path / "pool.sqlite", create=True)
    evos = []
    for i in range(2):
        ex = load_example(write_example(tmp_path / f"c{i}", iterations=12, sleep=0.0, seed=i))
        cfg = ex.config.with_overrides(budget_pool=pool, pool_migration={"interval": 2, "count": 1}, workers=1,
                                       iterations=12, name=f"island{i}")
        evos.append(Evolution.start(ex, cfg, store, progress=False))
    a, b = evos
    a.run()  # the pool's 12 children all go to A; A publishes a migrant every 2 children
    published = [m for m in migrants_of(store, pool) if m["from_run"] == a.run_id]
    assert len(published) >= 3, published
    assert all(m["taken_by"] is None for m in published)
    first, second = published[0]["program_id"], published[1]["program_id"]
    with store._begin() as c:  # B claims one, then "dies" before writing its events
        assert claims.claim_program(c, f"pool:{pool}", first, b.run_id, lease_s=1e12)
    for evo in evos:
        evo.close()
    back = Evolution.resume(store, b.run_id, progress=False)
    assert back.migration.received == [] and not back.migration.skipped
    back.migration.pick_up()  # its own claim is delivered now, and the rest is taken
    received = list(back.migration.received) + list(back.migration.skipped)
    assert first in received and second in received
    assert {m["taken_by"] for m in migrants_of(store, pool) if m["from_run"] == a.run_id} == {b.run_id}
    in_archive = {e.program_id for e in back.archive.elites()}
    assert set(back.migration.received) & in_archive  # migrants sit in B's archive
    back.close()
    again = Evolution.resume(store, b.run_id, progress=False)  # replays the received migrants
    assert again.migration.received == back.migration.received
    assert {e.program_id for e in again.archive.elites()} == in_archive
    events = store.execute("SELECT program_id, data FROM archive_events WHERE run_id = :r AND kind = 'migrated'",
                           r=b.run_id)
    assert events and {pid for pid, _ in events} <= set(back.migration.received)
    assert all(json.loads(d)["from_run"] == a.run_id for _, d in events)
    again.close()
    store.close()
