"""Synthetic rows for the viewer's tests and benchmark, written with SQLAlchemy Core over
``qdevolve.db.schema`` (the same tables a run writes), not through the store's internals."""

from __future__ import annotations

import hashlib
import json
import random
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, insert, select
from sqlalchemy.engine import Engine

from qdevolve.db import schema as S

__all__ = ["engine", "new_database", "add_program", "add_policy", "HOSTILE", "hostile_program", "synthetic_run"]

# Each payload would run script if the page parsed database text as HTML.
HOSTILE = [
    "</script><script>window.__pwned = 'script'</script>",
    "<img src=x onerror=\"window.__pwned='img'\">",
    "<svg onload=\"window.__pwned='svg'\"></svg>",
    "javascript:window.__pwned='href'",
    "{{7*7}} ${window.__pwned='template'}",
]


def engine(path: Path) -> Engine:
    return create_engine(f"sqlite:///{path}")


def new_database(path: Path) -> Engine:
    """An empty lineage database with the schema's tables (as a run creates it)."""
    eng = engine(path)
    S.metadata.create_all(eng)
    with eng.begin() as con:
        con.execute(insert(S.schema_table).values(version=S.SCHEMA_VERSION, qdevolve_version="test",
                                                  created_at=time.time()))
    return eng


def add_program(eng: Engine, run_id: str, *, code: str, parents: list[str] = (), status: str | None = "ok",
                score: float | None = 0.5, generation: int = 1, operator: str = "ast", island: int = 0,
                policy_version: int | None = None, pid: str | None = None, error: str | None = None,
                artifacts: dict[str, Any] | None = None, metrics: dict[str, Any] | None = None,
                tests: list[float] | None = None, features: dict[str, float] | None = None,
                rollout: tuple[str, str] | None = None, reward: float | None = None) -> str:
    """One program with its parent edges, an evaluation (unless ``status`` is None) and a rollout."""
    pid = pid or uuid.uuid4().hex
    now = time.time()
    with eng.begin() as con:
        con.execute(insert(S.programs).values(id=pid, run_id=run_id, code=code, language="python",
                                              code_hash=hashlib.sha256(code.encode()).hexdigest(),
                                              generation=generation, island=island, operator=operator,
                                              policy_version=policy_version, created_at=now, metadata="{}"))
        for i, parent in enumerate(parents):
            con.execute(insert(S.edges).values(parent_id=parent, child_id=pid, run_id=run_id, position=i,
                                               role="crossover" if len(parents) > 1 else "mutation"))
        if status is not None:
            con.execute(insert(S.evaluations).values(
                program_id=pid, run_id=run_id, status=status, score=score, metrics=json.dumps(metrics or {}),
                tests=None if tests is None else json.dumps(tests), features=json.dumps(features or {}),
                artifacts=json.dumps(artifacts or {}), error=error, runtime_s=0.1, created_at=now))
        if rollout is not None:
            con.execute(insert(S.rollouts).values(id=uuid.uuid4().hex, run_id=run_id, program_id=pid,
                                                  policy_version=policy_version, prompt=rollout[0],
                                                  completion=rollout[1], reward=reward, created_at=now,
                                                  prompt_tokens=10, completion_tokens=20))
        con.execute(S.runs.update().where(S.runs.c.id == run_id).values(updated_at=now))
    return pid


def add_policy(eng: Engine, run_id: str, version: int, metrics: dict[str, float]) -> None:
    with eng.begin() as con:
        con.execute(insert(S.policy_versions).values(run_id=run_id, version=version,
                                                     parent_version=None if version == 0 else version - 1,
                                                     objective="grpo", step=version, metrics=json.dumps(metrics),
                                                     created_at=time.time()))


def hostile_program(eng: Engine, run_id: str) -> str:
    """A program whose every text field carries script payloads, child of the run's seed."""
    with eng.connect() as con:
        seed = con.execute(select(S.programs.c.id).where(S.programs.c.run_id == run_id)
                           .order_by(S.programs.c.seq).limit(1)).scalar_one()
    text = "\n".join(HOSTILE)
    return add_program(
        eng, run_id, code=f"# {text}\nx = '''{text}'''\n", parents=[seed], status="error", score=None,
        operator="<b>op</b><img src=x onerror=\"window.__pwned='op'\">", error=f"Traceback: {text}",
        artifacts={"stderr": text, "<img src=x onerror=\"window.__pwned='key'\">": text},
        metrics={"<script>window.__pwned='metric'</script>": 1.0}, tests=[1.0, 0.0, 0.5],
        features={"mean_distance": 1.0, "spread": 1.0}, rollout=(f"prompt {text}", f"reply {text}"), reward=0.0,
        pid="ffff" + uuid.uuid4().hex[:28])


def synthetic_run(path: Path, n: int, *, seed: int = 0, name: str = "synthetic") -> str:
    """A database holding one run of ``n`` programs in a random lineage (benchmark input).

    Parents are drawn with a bias to recent and good programs (as selection does), 8% fail,
    every program has an evaluation, and an ``ok`` one that beats its cell's elite (10 x 10
    grid) an archive event.
    """
    eng = new_database(path)
    rng = random.Random(seed)
    run_id = uuid.uuid4().hex
    now = time.time()
    config = {"archive": {"type": "map_elites", "feature_dimensions": ["a", "b"], "ranges": [[0, 1], [0, 1]], "bins": 10}}
    ids = [uuid.uuid4().hex for _ in range(n)]
    gens = [0] * n
    progs, edges, evals, events = [], [], [], []
    occupant: dict[str, tuple[str, float]] = {}
    code = "def f(x):\n    return x\n"
    for i, pid in enumerate(ids):
        parent = None
        if i:
            lo = max(0, i - 2000)
            parent = max(rng.randrange(lo, i) for _ in range(2)) if rng.random() < 0.9 else rng.randrange(0, i)
            gens[i] = gens[parent] + 1
        ok = i == 0 or rng.random() > 0.08
        score = rng.random() * (1 + gens[i] / 50) if ok else None
        progs.append({"id": pid, "run_id": run_id, "code": code, "language": "python", "code_hash": pid,
                      "generation": gens[i], "island": i % 4, "operator": rng.choice(["ast", "diff", "rewrite"]),
                      "policy_version": None, "created_at": now + i, "metadata": "{}"})
        if parent is not None:
            edges.append({"parent_id": ids[parent], "child_id": pid, "role": "mutation", "position": 0,
                          "run_id": run_id})
        feats = {"a": rng.random(), "b": rng.random()}
        evals.append({"program_id": pid, "run_id": run_id, "status": "ok" if ok else "error", "score": score,
                      "metrics": "{}", "features": json.dumps(feats), "artifacts": "{}", "runtime_s": 0.1,
                      "created_at": now + i})
        cell = f"{int(feats['a'] * 10)},{int(feats['b'] * 10)}"
        held = occupant.get(cell)
        if ok and (held is None or score > held[1]):  # MAP-Elites: a cell keeps its best program
            events.append({"run_id": run_id, "program_id": pid, "archive": "map_elites", "island": 0,
                           "cell": cell, "kind": "added" if held is None else "improved",
                           "replaced_id": None if held is None else held[0],
                           "score": score, "data": "{}", "created_at": now + i})
            occupant[cell] = (pid, score)
    with eng.begin() as con:
        con.execute(insert(S.runs).values(id=run_id, name=name, status="finished", config=json.dumps(config),
                                          created_at=now, updated_at=now + n))
    eng.dispose()
    # Bulk rows through the DB-API directly (the schema's tables and columns; 10x faster than Core here).
    raw = sqlite3.connect(path)
    with raw:
        for table, rows in ((S.programs, progs), (S.edges, edges), (S.evaluations, evals), (S.archive_events, events)):
            cols = list(rows[0])
            raw.executemany(f"INSERT INTO {table.name} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                            [tuple(r[c] for c in cols) for r in rows])
    raw.close()
    return run_id
