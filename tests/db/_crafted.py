"""Crafted SQLite lineage databases: a small valid run, then one hostile change each.

Built with SQLAlchemy Core over ``qdevolve.db.schema`` (the tables a run writes) and then
altered with plain ``sqlite3``, as an attacker would hand one over.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
import uuid
from pathlib import Path

from sqlalchemy import create_engine, insert

from qdevolve.db import schema as S

__all__ = ["valid_db", "CRAFTS", "craft"]


def valid_db(path: Path, n: int = 6) -> str:
    """A database with one run of ``n`` programs (a chain), each evaluated, with archive events."""
    eng = create_engine(f"sqlite:///{path}")
    S.metadata.create_all(eng)
    rid = uuid.uuid4().hex
    now = time.time()
    config = {"archive": {"type": "map_elites", "feature_dimensions": ["a", "b"], "ranges": [[0, 1], [0, 1]],
                          "bins": 4}, "iterations": n}
    with eng.begin() as c:
        c.execute(insert(S.schema_table).values(version=S.SCHEMA_VERSION, qdevolve_version="test", created_at=now))
        c.execute(insert(S.runs).values(id=rid, name="crafted", status="finished", config=json.dumps(config),
                                        example_dir="/nonexistent", seed=0, created_at=now, updated_at=now))
        prev = None
        for i in range(n):
            pid = f"{i:02d}" + uuid.uuid4().hex[:30]
            code = f"x = {i}\n"
            c.execute(insert(S.programs).values(id=pid, run_id=rid, code=code, language="python",
                                                code_hash=hashlib.sha256(code.encode()).hexdigest(),
                                                generation=i, island=0, operator="seed" if i == 0 else "ast",
                                                created_at=now + i, metadata="{}"))
            if prev is not None:
                c.execute(insert(S.edges).values(parent_id=prev, child_id=pid, run_id=rid, position=0,
                                                 role="mutation"))
            c.execute(insert(S.evaluations).values(
                program_id=pid, run_id=rid, status="ok", score=i / n, metrics=json.dumps({"m": i}),
                tests=json.dumps([1.0, 0.0]), features=json.dumps({"a": i / n, "b": 0.5}), artifacts="{}",
                runtime_s=0.1, created_at=now + i))
            c.execute(insert(S.archive_events).values(run_id=rid, program_id=pid, cell=json.dumps([i % 4, 2]), archive="map_elites", island=0,
                                                      kind="new", score=i / n, data="{}", created_at=now + i))
            prev = pid
    eng.dispose()
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode=WAL")  # as a run leaves it
    con.close()
    return rid


#: name -> SQL that turns a valid database into a crafted one
CRAFTS: dict[str, str] = {
    "recursive_view": ("CREATE VIEW forever AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) "
                       "SELECT x FROM r"),
    "shadowing_view": ("ALTER TABLE evaluations RENAME TO evaluations_old; "
                       "CREATE VIEW evaluations AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 "
                       "FROM r) SELECT e.* FROM evaluations_old e, r ORDER BY r.x DESC"),
    "trigger": ("CREATE TRIGGER t AFTER INSERT ON programs BEGIN DELETE FROM programs; END"),
    "missing_column": "ALTER TABLE evaluations DROP COLUMN features",
    "missing_table": "DROP TABLE edges",
    "text_score": "UPDATE evaluations SET score = 'not a number'",
    "blob_score": "UPDATE evaluations SET score = x'00ff'",
    "bad_json": "UPDATE evaluations SET metrics = '{not json', features = '[1,', tests = 'x'",
    "bad_config": "UPDATE runs SET config = '[1, 2'",
    "text_times": "UPDATE programs SET created_at = 'yesterday', generation = 'g'",
    "bad_cell": "UPDATE archive_events SET cell = '{\"a\": [[[['",
    "edge_cycle": ("INSERT INTO edges (parent_id, child_id, run_id, position, role) SELECT "
                   "(SELECT id FROM programs ORDER BY seq DESC LIMIT 1), id, run_id, 0, 'mutation' FROM programs "
                   "ORDER BY seq LIMIT 1"),
    "text_ids": "UPDATE programs SET policy_version = 'v', island = 'i'",
}


def craft(path: Path, name: str) -> Path:
    """Apply ``CRAFTS[name]`` to the valid database at ``path`` (in place)."""
    con = sqlite3.connect(path)
    try:
        con.executescript(CRAFTS[name])
        con.commit()
    finally:
        con.close()
    return path
