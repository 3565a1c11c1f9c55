"""The viewer over PostgreSQL: a URL opens read-only, the password is never shown."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import create_engine, insert, text

from qdevolve.db import schema as S
from qdevolve.serve import queries as Q
from qdevolve.serve.db import ReadOnlyDB
from qdevolve.serve.tree import LineageCache, TreeQuery

pytestmark = pytest.mark.postgres


def test_postgres_url_reads_a_run_read_only(pg_url: str) -> None:
    pytest.importorskip("psycopg")
    schema = "serve_" + uuid.uuid4().hex[:10]
    admin = create_engine(pg_url)
    with admin.begin() as con:
        con.execute(text(f"CREATE SCHEMA {schema}"))
    try:
        eng = admin.execution_options(schema_translate_map={None: schema})
        S.metadata.create_all(eng)
        with eng.begin() as con:
            con.execute(insert(S.schema_table).values(version=S.SCHEMA_VERSION, qdevolve_version="t", created_at=0.0))
            con.execute(insert(S.runs).values(id="r1", name="pg-run", status="running", config="{}", created_at=0.0,
                                              updated_at=1.0))
            con.execute(insert(S.programs), [{"id": f"p{i}", "run_id": "r1", "code": f"x = {i}\n", "code_hash": str(i),
                                              "generation": min(i, 1), "created_at": float(i)} for i in range(3)])
            con.execute(insert(S.edges), [{"parent_id": "p0", "child_id": f"p{i}", "role": "mutation", "run_id": "r1"}
                                          for i in (1, 2)])
            con.execute(insert(S.evaluations), [{"program_id": f"p{i}", "run_id": "r1", "status": "ok", "score": i / 2,
                                                 "created_at": float(i)} for i in range(3)])
        db = ReadOnlyDB(f"{pg_url}?options=-csearch_path%3D{schema}")
        assert ":***@" in db.label and ":qdevolve@" not in db.label  # the password is masked
        assert [r["name"] for r in Q.list_runs(db)] == ["pg-run"]
        tree = LineageCache(db).select("r1", TreeQuery())
        assert tree["shown"] == 3 and tree["best"] == "p2"
        assert Q.program_detail(db, "p1")["parents"][0]["parent_id"] == "p0"
        with pytest.raises(Exception, match="read-only"):
            with db.engine.begin() as con:
                con.execute(text("DELETE FROM programs"))
        db.close()
    finally:
        with admin.begin() as con:
            con.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()
