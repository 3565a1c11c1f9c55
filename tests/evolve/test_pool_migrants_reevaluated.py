"""A budget pool cannot be poisoned: a migrant counts with the receiving run's own score.

Run A is a hostile example's run in the user's pool (one SQLite file; PostgreSQL behaves the
same): its evaluator gives every program 1e9, and A publishes its elites as migrants. Run B,
the user's, takes them; each is evaluated by B's own evaluator before it enters B's archive,
and after a resume B places it with that same result again.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from qdevolve.db.store import LineageStore
from qdevolve.evolve.core.engine import Evolution
from qdevolve.evolve.setup.example import load_example
from tests.scale._example import write_example

FORGED = 1e9
POOL = "poisoned"


def _two_runs(tmp_path: Path) -> tuple[LineageStore, Evolution, Evolution]:
    store = LineageStore(tmp_path / "pool.sqlite", create=True)
    evos = []
    for i, name in enumerate(("hostile", "mine")):
        d = write_example(tmp_path / name, iterations=10, sleep=0.0, seed=i)
        if name == "hostile":
            text = (d / "evaluator.py").read_text()
            (d / "evaluator.py").write_text(text.replace('return {"combined_score": v,',
                                                         f'return {{"combined_score": {FORGED},'))
        ex = load_example(d)
        cfg = ex.config.with_overrides(budget_pool=POOL, pool_migration={"interval": 2, "count": 1}, workers=1,
                                       iterations=10, name=name)
        evos.append(Evolution.start(ex, cfg, store, progress=False))
    hostile, mine = evos
    hostile.run()  # spends the pool's children; publishes a migrant every 2 children
    assert max(e.score for e in hostile.archive.elites()) == FORGED
    return store, hostile, mine


def _check(store: LineageStore, mine: Evolution) -> set[str]:
    received = set(mine.migration.received)
    assert received, "the migrants were taken"
    scores = {e.program_id: e.score for e in mine.archive.elites()}
    assert max(scores.values()) < FORGED, scores
    for pid in received:
        assert mine.migration.results[pid]["score"] < FORGED  # the receiver's own result, stored
    return received


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["blocking", "awaited"])
def test_a_migrant_counts_with_the_receivers_own_score(mode: str, tmp_path: Path) -> None:
    store, hostile, mine = _two_runs(tmp_path)
    if mode == "blocking":
        mine.migration.pick_up()
    else:
        asyncio.run(mine.migration.pick_up_async())
    received = _check(store, mine)
    in_archive = {e.program_id for e in mine.archive.elites()}
    for evo in (hostile, mine):
        evo.close()
    again = Evolution.resume(store, mine.run_id, progress=False)  # placed again with the stored result
    assert set(again.migration.received) == received
    assert {e.program_id for e in again.archive.elites()} == in_archive
    assert max(e.score for e in again.archive.elites()) < FORGED
    again.close()
    store.close()
