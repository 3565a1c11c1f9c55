"""Engine set-up: the SQLite connection settings, URL checks, schema creation and migration."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, func, insert, inspect, select, text
from sqlalchemy.pool import QueuePool

from qdevolve.db import schema as S
from qdevolve.db._open import BUSY_TIMEOUT_S, read_only_file
from qdevolve.db._untrusted import bound_sqlite, query_budget, reset_budget
from qdevolve.errors import DatabaseError

__all__ = ["BUSY_TIMEOUT_S", "WRITE_OPTION", "sqlite_engine", "url_needs_init", "init_schema", "migrate"]

WRITE_OPTION = "qdevolve_write"
CACHE_KIB = 131072  # per-connection page cache: keeps the random-key indexes hot
WAL_CHECKPOINT_PAGES = 16384  # checkpoint every ~64 MiB of WAL: fewer, larger fsyncs


def sqlite_engine(path: Path) -> Engine:
    """A pooled engine on ``path``: WAL, ``synchronous=NORMAL``, foreign keys, busy timeout.

    A file that cannot be written (read-only mount, read-only copy) is opened read-only and
    immutable, so ``runs list``, ``lineage`` and ``archive`` still read it."""
    readonly = read_only_file(path)
    url = f"sqlite:///file:{path}?mode=ro&immutable=1&uri=true" if readonly else f"sqlite:///{path}"
    engine = create_engine(
        url,
        poolclass=QueuePool,
        pool_size=4,
        max_overflow=8,
        connect_args={"timeout": BUSY_TIMEOUT_S, "check_same_thread": False},
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_con: Any, _rec: Any) -> None:
        dbapi_con.isolation_level = None  # we issue BEGIN IMMEDIATE ourselves
        bound_sqlite(dbapi_con)  # reading commands: each statement's database time is bounded
        cur = dbapi_con.cursor()
        if readonly:
            cur.close()
            return
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute(f"PRAGMA cache_size={-CACHE_KIB}")
        cur.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_PAGES}")
        cur.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
        cur.close()

    if query_budget() is not None:
        @event.listens_for(engine, "before_cursor_execute")
        def _on_execute(conn: Any, *_args: Any) -> None:
            reset_budget(conn.connection.dbapi_connection)

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        # Writers take the write lock up front (no deadlocked read->write upgrades between
        # processes); readers use a deferred snapshot so they never block writers under WAL.
        if conn.get_execution_options().get(WRITE_OPTION):
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            conn.exec_driver_sql("BEGIN")

    return engine


def url_needs_init(engine: Engine, name: str, create: bool) -> bool:
    """Check a database given by URL; True when the schema must be created."""
    try:
        names = set(inspect(engine).get_table_names())
    except Exception as exc:
        cause = getattr(exc, "orig", None) or exc
        detail = " ".join(str(cause).split())  # one line
        raise DatabaseError(f"{name}: cannot connect ({type(cause).__name__}: {detail}); "
                            f"check the URL, the server and the credentials") from exc
    if "qdevolve_schema" not in names:
        if names and not create:
            raise DatabaseError(f"{name}: is not a qdevolve lineage database")
        if not create:
            raise DatabaseError(f"{name}: holds no qdevolve database yet")
        return True
    with engine.connect() as c:
        version = c.execute(select(func.max(S.schema_table.c.version))).scalar()
    if version is not None and version > S.SCHEMA_VERSION:
        raise DatabaseError(f"{name}: was written by a newer qdevolve (schema v{version}); upgrade qdevolve")
    return False


def init_schema(c: Connection) -> None:
    """Create every table of a new database and record the schema version."""
    from qdevolve import __version__

    S.metadata.create_all(c)
    if c.execute(select(func.count()).select_from(S.schema_table)).scalar() == 0:
        c.execute(insert(S.schema_table).values(
            version=S.SCHEMA_VERSION, qdevolve_version=__version__, created_at=time.time()))


def schema_version(c: Connection) -> int:
    return int(c.execute(select(func.max(S.schema_table.c.version))).scalar() or 0)


def migrate(c: Connection) -> None:
    """Bring an older database up to :data:`SCHEMA_VERSION` (only adds columns and tables).

    v1 -> v2: ``evaluations.worker`` (where an evaluation ran) and the ``run_leases`` table.
    v2 -> v3: the ``archive_snapshots`` table (a run without snapshots is replayed in full).
    v3 -> v4: the ``prompt_templates`` table (a run without it never evolved its prompts).
    """
    from qdevolve import __version__

    version = schema_version(c)
    if version >= S.SCHEMA_VERSION:
        return
    if version < 2:
        cols = {col["name"] for col in inspect(c).get_columns("evaluations")}
        if "worker" not in cols:
            c.execute(text("ALTER TABLE evaluations ADD COLUMN worker VARCHAR(128)"))
        S.run_leases.create(c, checkfirst=True)
    if version < 3:
        S.archive_snapshots.create(c, checkfirst=True)
    if version < 4:
        S.prompt_templates.create(c, checkfirst=True)
    c.execute(insert(S.schema_table).values(version=S.SCHEMA_VERSION, qdevolve_version=__version__,
                                            created_at=time.time()))
