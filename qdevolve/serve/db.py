"""Open a lineage database read-only and expose its tables as they are on disk.

The viewer never writes. SQLite files are opened through a ``file:...?mode=ro`` URI (no
``immutable`` flag: a run may still be writing, and the viewer must see its WAL); PostgreSQL
sessions start with ``default_transaction_read_only=on``. Tables are described by
``qdevolve.db.schema`` but selected only with the columns the database really has, so an
older database (a column the schema gained later) and a newer one (a column this qdevolve
does not know, e.g. ``evaluations.worker``) both open; a missing table (no policy tables)
reads as empty.
"""

from __future__ import annotations

import sqlite3
import urllib.parse
from pathlib import Path
from typing import Any

from sqlalchemy import Column, MetaData, Table, create_engine, event, inspect
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import QueuePool

from qdevolve.db import schema as S
from qdevolve.db._open import check_sqlite_file, display_target
from qdevolve.db._untrusted import bound_sqlite, budget_from_env, query_budget, reset_budget
from qdevolve.errors import DatabaseError

__all__ = ["ReadOnlyDB", "is_url"]

_SQLITE_MAGIC = b"SQLite format 3\x00"


def is_url(target: str) -> bool:
    """True for a database URL (``postgresql+psycopg://...``), False for a file path."""
    return "://" in target


class ReadOnlyDB:
    """A read-only handle on a lineage database (SQLite path or SQLAlchemy URL).

    Attributes:
        engine: The SQLAlchemy engine (every connection read-only).
        label: How to show the database to a user (password masked).
        tables: Table name -> a :class:`~sqlalchemy.Table` holding the columns the database
            really has (typed as in ``qdevolve.db.schema`` where known).

    Raises:
        DatabaseError: the path or URL is not a readable qdevolve database (one line, the
            password masked).
    """

    def __init__(self, target: str) -> None:
        target = str(target)
        self.label = display_target(target)
        self.is_sqlite = not is_url(target) or target.startswith("sqlite")
        try:
            self.engine = self._engine(target)
            existing = self._reflect()
        except SQLAlchemyError as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise DatabaseError(f"{self.label}: cannot be read ({first.replace(target, self.label)})") from None
        if "qdevolve_schema" not in existing or "programs" not in existing:
            shown = ", ".join(sorted(existing)[:5]) or "none"
            raise DatabaseError(f"{self.label}: is not a qdevolve lineage database (tables: {shown}); "
                                "pass a database written by 'qdevolve run'")
        self.tables = {name: self._view(name, cols) for name, cols in existing.items()
                       if name in S.metadata.tables}

    # ----------------------------------------------------------------- opening
    def _engine(self, target: str) -> Engine:
        if is_url(target) and not target.startswith("sqlite"):
            url = make_url(target)
            args: dict[str, str] = {}
            if url.get_backend_name() == "postgresql":
                # keep the URL's own libpq options (e.g. -csearch_path=...) and add read-only
                given = url.query.get("options")
                given = " ".join(given) if isinstance(given, tuple) else (given or "")
                url = url.difference_update_query(["options"])
                args["options"] = (f"{given} -c default_transaction_read_only=on "
                                   f"-c statement_timeout={int((query_budget() or budget_from_env()) * 1000)}"
                                   ).strip()
            return create_engine(url, connect_args=args, pool_pre_ping=True, pool_size=4)
        path = Path(make_url(target).database or "") if is_url(target) else Path(target)
        _check_sqlite_file(path)
        check_sqlite_file(path, create=False)  # the schema: no views, triggers or missing columns
        uri = f"file:{urllib.parse.quote(str(path.resolve()))}?mode=ro"
        seconds = query_budget() or budget_from_env()

        def connect() -> sqlite3.Connection:
            con = sqlite3.connect(uri, uri=True, timeout=30, check_same_thread=False)
            con.execute("PRAGMA query_only = ON")
            bound_sqlite(con, seconds)  # each statement's database time is bounded
            return con

        engine = create_engine("sqlite://", creator=connect, poolclass=QueuePool, pool_size=4)

        @event.listens_for(engine, "before_cursor_execute")
        def _new_statement(conn: Any, *_args: Any) -> None:
            reset_budget(conn.connection.dbapi_connection)

        return engine

    def _reflect(self) -> dict[str, list[str]]:
        insp = inspect(self.engine)
        return {name: [c["name"] for c in insp.get_columns(name)] for name in insp.get_table_names()}

    @staticmethod
    def _view(name: str, columns: list[str]) -> Table:
        known = S.metadata.tables[name].c
        cols = [Column(c, known[c].type, primary_key=known[c].primary_key) if c in known else Column(c)
                for c in columns]
        return Table(name, MetaData(), *cols)

    # ----------------------------------------------------------------- access
    def has(self, table: str, column: str | None = None) -> bool:
        """Whether the database has ``table`` (and its ``column``)."""
        t = self.tables.get(table)
        return t is not None and (column is None or column in t.c)

    def table(self, name: str) -> Table | None:
        """The on-disk view of table ``name``, or ``None`` when the database lacks it."""
        return self.tables.get(name)

    def close(self) -> None:
        self.engine.dispose()


def _check_sqlite_file(path: Path) -> None:
    if not path.exists():
        raise DatabaseError(f"{path}: no such database; check the path (a run writes archives/<run>.sqlite)")
    if path.is_dir():
        raise DatabaseError(f"{path}: is a directory, not a database file; pass the .sqlite file")
    with path.open("rb") as fh:
        head = fh.read(16)
    if head != _SQLITE_MAGIC:
        raise DatabaseError(f"{path}: is not a SQLite file; pass a database written by 'qdevolve run'")
