"""Opening what is not a qdevolve database: one line, exit status 2, the file untouched."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from qdevolve.db.schema import SCHEMA_VERSION
from qdevolve.db.store import LineageStore, open_store
from qdevolve.errors import DatabaseError


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _foreign_sqlite(p: Path) -> None:
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    con.execute("INSERT INTO customers VALUES (1, 'ada')")
    con.commit()
    con.close()


def _future_schema(p: Path) -> None:
    LineageStore(p, create=True).close()
    con = sqlite3.connect(p)
    con.execute("INSERT INTO qdevolve_schema VALUES (?, '99.0', 0)", (SCHEMA_VERSION + 1,))
    con.commit()
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()


def _text(p: Path) -> None:
    p.write_text("programs,score\nabc,0.5\n")


CASES = {
    "foreign_sqlite": (_foreign_sqlite, "not a qdevolve lineage database"),
    "text_file": (_text, "is a text file"),
    "future_schema": (_future_schema, "newer qdevolve"),
    "missing": (None, "no such database"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_cli_refuses_with_one_line_and_exit_2(case: str, tmp_path: Path) -> None:
    make, expected = CASES[case]
    path = tmp_path / "x.sqlite"
    if make:
        make(path)
    before = _digest(path) if path.exists() else None
    listing = sorted(q.name for q in tmp_path.iterdir())
    proc = subprocess.run([sys.executable, "-m", "qdevolve", "runs", "list", "--db", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert str(path) in lines[0] and expected in lines[0]
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    if before is None:
        assert not path.exists()
    else:
        assert _digest(path) == before
    assert sorted(q.name for q in tmp_path.iterdir()) == listing  # no -wal/-shm side files


@pytest.mark.parametrize("case", ["foreign_sqlite", "text_file", "future_schema"])
def test_library_refuses_even_with_create(case: str, tmp_path: Path) -> None:
    make, expected = CASES[case]
    path = tmp_path / "x.sqlite"
    make(path)
    before = _digest(path)
    with pytest.raises(DatabaseError, match=expected):
        LineageStore(path, create=True)
    assert _digest(path) == before


def test_empty_file_and_directory(tmp_path: Path) -> None:
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    with pytest.raises(DatabaseError, match="empty file"):
        open_store(empty)
    with pytest.raises(DatabaseError, match="directory"):
        open_store(tmp_path)
    LineageStore(empty, create=True).close()  # an empty file may become a database when asked
    assert open_store(empty).list_runs() == []


@pytest.mark.postgres
def test_postgres_database_without_schema_is_refused(pg_url: str) -> None:
    from sqlalchemy import create_engine

    from qdevolve.db import schema as S

    eng = create_engine(pg_url)
    S.metadata.drop_all(eng)
    eng.dispose()
    with pytest.raises(DatabaseError, match="no qdevolve database"):
        open_store(pg_url)


@pytest.mark.slow
@pytest.mark.postgres
def test_postgres_through_the_cli_masks_the_password(pg_url: str) -> None:
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    from qdevolve.db import schema as S
    from qdevolve.types import EvalResult, Program

    eng = create_engine(pg_url)
    S.metadata.drop_all(eng)
    eng.dispose()
    st = LineageStore(pg_url, create=True)
    rid = st.create_run(name="pg-cli")
    seed = Program(code="a = 1\n", run_id=rid)
    st.write(programs=[seed, Program(code="a = 2\n", run_id=rid, parent_ids=(seed.id,))],
             evaluations=[(seed.id, EvalResult(score=0.5))])
    st.close()
    proc = subprocess.run([sys.executable, "-m", "qdevolve", "runs", "list", "--db", pg_url, "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "pg-cli" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "qdevolve", "lineage", "tree", "--db", pg_url],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and seed.id[:10] in proc.stdout, proc.stderr
    url = make_url(pg_url)
    if url.password:
        bad = url.set(password=url.password + "-wrong").render_as_string(hide_password=False)
        proc = subprocess.run([sys.executable, "-m", "qdevolve", "runs", "list", "--db", bad],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert url.password + "-wrong" not in proc.stderr and "***" in proc.stderr
