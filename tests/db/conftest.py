"""Store fixtures: the same tests run on SQLite files and, when available, PostgreSQL."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from qdevolve.db import schema as S
from qdevolve.db.store import LineageStore
from qdevolve.types import EvalResult, Program


def _pg_store(url: str) -> LineageStore:
    from sqlalchemy import create_engine

    eng = create_engine(url)
    S.metadata.drop_all(eng)  # a clean database for each test
    eng.dispose()
    return LineageStore(url, create=True)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LineageStore]:
    """A fresh store on each backend."""
    if request.param == "sqlite":
        st = LineageStore(tmp_path / "run.sqlite", create=True)
    else:
        st = _pg_store(request.getfixturevalue("pg_url"))
    try:
        yield st
    finally:
        st.close()


def random_tree(store: LineageStore, run_id: str, n: int, *, seed: int = 0,
                batch: int = 5000) -> list[Program]:
    """``n`` programs: a seed and random mutations/crossovers, each evaluated."""
    rng = random.Random(seed)
    progs: list[Program] = []
    gens: dict[str, int] = {}
    for i in range(n):
        if not progs:
            parents: tuple[str, ...] = ()
        elif rng.random() < 0.1 and len(progs) > 1:
            a, b = rng.sample(range(len(progs)), 2)
            parents = (progs[a].id, progs[b].id)
        else:
            parents = (progs[rng.randrange(len(progs))].id,)
        gen = 0 if not parents else 1 + max(gens[p] for p in parents)
        p = Program(code=f"def f():\n    return {i}\n", run_id=run_id, parent_ids=parents,
                    generation=gen, operator="seed" if not parents else ("crossover" if len(parents) > 1 else "diff"),
                    island=i % 4, policy_version=None if i % 3 == 0 else i % 7)
        gens[p.id] = gen
        progs.append(p)
    for i in range(0, n, batch):
        chunk = progs[i:i + batch]
        store.write(programs=chunk, evaluations=[
            (p.id, EvalResult(score=rng.random()) if k % 10 else EvalResult(status="error", error="x"))
            for k, p in enumerate(chunk)])
    return progs

