"""Opening a database safely: refuse what is not ours without touching it.

A database target is either a SQLite file path or a SQLAlchemy URL
(``postgresql+psycopg://user:pass@host/db``). :func:`normalize_target` tells them apart once,
at the edge (``sqlite:///file`` becomes the path, so the store's tuned SQLite engine is used),
and :func:`display_target` is the only way a target is shown: a URL's password masked.
"""

from __future__ import annotations

import os
import sqlite3
import urllib.parse
from pathlib import Path

from qdevolve.db._version import SCHEMA_VERSION
from qdevolve.errors import DatabaseError

BUSY_TIMEOUT_S = 120.0  # seconds a connection waits for another writer (the store and the sqlite3 view)

SQLITE_MAGIC = b"SQLite format 3\x00"


def is_url(target: str) -> bool:
    return "://" in target


def display_target(target: str | Path) -> str:
    """How messages, hints, logs, the store's ``name`` and the viewer show a target: a URL's
    password as ``***`` (an unparsable URL as its scheme and ``***``); a path as it is."""
    text = str(target)
    if not is_url(text):
        return text
    from sqlalchemy.engine import make_url

    try:
        return make_url(text).render_as_string(hide_password=True)
    except Exception:  # unparseable: show the scheme only, never what may hold a password
        return text.split("://", 1)[0] + "://***"


def normalize_target(target: str | Path) -> str:
    """The store target for a ``--db`` value: a path, or a checked SQLAlchemy URL.

    ``sqlite:///relative.sqlite`` and ``sqlite:////abs.sqlite`` become plain paths. Any other
    URL must name a dialect and driver SQLAlchemy can load; it is never taken as a path.

    Raises:
        DatabaseError: an unparseable URL, an unknown dialect, a missing driver, or an
            in-memory SQLite database (nothing would persist); the password is never shown.
    """
    text = str(target).strip()
    if not text:
        raise DatabaseError("--db: empty database target; pass a .sqlite path or a SQLAlchemy URL")
    if not is_url(text):
        return text
    from sqlalchemy.engine import make_url

    shown = display_target(text)
    try:
        url = make_url(text)
    except Exception as exc:
        raise DatabaseError(f"--db {shown}: not a valid SQLAlchemy URL ({type(exc).__name__}); "
                            f"write e.g. postgresql+psycopg://USER:PASSWORD@HOST:5432/DB") from None
    if url.get_backend_name() == "sqlite":
        if not url.database or url.database == ":memory:":
            raise DatabaseError(f"--db {shown}: an in-memory SQLite database keeps nothing; "
                                f"pass a file, e.g. sqlite:///archives/run.sqlite")
        return url.database
    if url.drivername in ("postgres", "postgresql") and not _importable("psycopg2"):
        url = url.set(drivername="postgresql+psycopg")  # the driver qdevolve[postgres] installs
        text = url.render_as_string(hide_password=False)
    try:
        dialect = url.get_dialect()
    except Exception:
        raise DatabaseError(f"--db {shown}: unknown database kind '{url.drivername}'; use "
                            f"postgresql+psycopg://USER:PASSWORD@HOST:5432/DB or a .sqlite path") from None
    try:
        dialect.import_dbapi()
    except ImportError as exc:
        raise DatabaseError(f"--db {shown}: the driver for '{url.drivername}' is not installed "
                            f"({exc.name or exc}); pip install 'qdevolve[postgres]'") from None
    return text


def read_only_file(path: Path) -> bool:
    """True when ``path`` or its directory cannot be written (a read-only mount or copy)."""
    return path.exists() and not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK))


def check_sqlite_file(path: Path, *, create: bool) -> bool:
    """Validate ``path`` read-only. Returns True when the schema must be created.

    Raises:
        DatabaseError: one line naming the file and what to do; the file is not modified.
    """
    if not path.exists():
        if not create:
            raise DatabaseError(
                f"{path}: no such database; check the path, or start a run with "
                f"'qdevolve run EXAMPLE_DIR --db {path}'"
            )
        return True
    if path.is_dir():
        raise DatabaseError(f"{path}: is a directory, not a database file; pass the .sqlite file")
    size = path.stat().st_size
    if size == 0:
        if not create:
            raise DatabaseError(f"{path}: is an empty file, not a qdevolve database")
        return True
    with path.open("rb") as fh:
        head = fh.read(16)
    if head != SQLITE_MAGIC:
        kind = "a text file" if _looks_like_text(path) else "not a SQLite file"
        raise DatabaseError(
            f"{path}: is {kind}, not a qdevolve database; pass a database written by "
            f"'qdevolve run' or a new path"
        )
    try:
        con = sqlite3.connect(_readonly_uri(path), uri=True, timeout=30)
        try:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if "qdevolve_schema" not in tables:
                if not tables and create:
                    return True
                shown = ", ".join(sorted(tables)[:5]) or "none"
                raise DatabaseError(
                    f"{path}: is a SQLite database but not a qdevolve lineage database "
                    f"(tables: {shown}); pass a qdevolve database or a new path"
                )
            row = con.execute("SELECT MAX(version) FROM qdevolve_schema").fetchone()
            if row and isinstance(row[0], int) and row[0] <= SCHEMA_VERSION:
                from qdevolve.db._untrusted import check_sqlite_schema

                check_sqlite_schema(con, path, row[0])  # no views, triggers or missing columns
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
            raise
        raise DatabaseError(f"{path}: cannot be read as SQLite ({exc}); is it corrupt?") from exc
    version = row[0] if row else None
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
        raise DatabaseError(f"{path}: its qdevolve_schema table holds {str(version)[:40]!r}, not a version number; "
                            "it is damaged or not written by qdevolve")
    if version is None:
        raise DatabaseError(f"{path}: has an empty qdevolve_schema table; it is not a usable database")
    if version > SCHEMA_VERSION:
        raise DatabaseError(
            f"{path}: was written by a newer qdevolve (schema v{version}; this qdevolve reads up "
            f"to v{SCHEMA_VERSION}); upgrade qdevolve with 'pip install -U qdevolve'"
        )
    return False


def sqlite_run_count(path: Path) -> int | None:
    """Runs a SQLite file holds, read without writing to it; ``None`` when it cannot be read
    as a run database (not SQLite, no ``runs`` table, locked)."""
    try:
        con = sqlite3.connect(_readonly_uri(Path(path)), uri=True)
        try:
            return int(con.execute("SELECT COUNT(*) FROM runs").fetchone()[0])
        finally:
            con.close()
    except sqlite3.Error:
        return None


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _readonly_uri(path: Path) -> str:
    """A read-only URI that leaves no trace: ``immutable`` (no -wal/-shm files created) when
    no WAL file exists, else plain read-only so the live WAL's content is seen."""
    quoted = urllib.parse.quote(str(path.resolve()))
    wal = path.with_name(path.name + "-wal")
    return f"file:{quoted}?mode=ro" + ("" if wal.exists() else "&immutable=1")


def _looks_like_text(path: Path) -> bool:
    with path.open("rb") as fh:
        chunk = fh.read(4096)
    try:
        chunk.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return b"\x00" not in chunk
