"""A read-only view of a SQLite run database through the standard ``sqlite3`` module.

The whole-run views (``lineage export``, ``lineage tree``) read a few plain scans; opening
the store for them would import SQLAlchemy (about 0.45 s of a 200,000-program export). A
:class:`SqliteView` answers what those views ask of a :class:`~qdevolve.db.store.LineageStore`
(``resolve_run``, ``get_run``, ``count_programs`` and the scans' cursor) with the same
results and the same one-line errors, inside one read transaction (one consistent snapshot
of a live run). :func:`open_view` gives ``None`` for a server URL or a file the store must
upgrade first; callers then open the store.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from qdevolve.db._open import BUSY_TIMEOUT_S, check_sqlite_file, is_url, read_only_file
from qdevolve.db._untrusted import bound_sqlite, reset_budget
from qdevolve.db._version import SCHEMA_VERSION
from qdevolve.errors import DatabaseError

__all__ = ["SqliteView", "open_view"]

_SCAN_CACHE_KIB = 8192  # a one-pass scan gains nothing from a big page cache


class SqliteView:
    """Reads of one SQLite database file, never a write. Use as a context manager."""

    dialect = "sqlite"

    def __init__(self, path: Path, con: sqlite3.Connection) -> None:
        self.path, self.name, self.con = path, str(path), con

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> SqliteView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def scan_cursor(self, sql: str, params: dict[str, Any]) -> Iterator[sqlite3.Cursor]:
        """A cursor with ``sql`` executed (``:name`` parameters)."""
        reset_budget(self.con)
        cur = self.con.execute(sql, params)
        try:
            yield cur
        finally:
            cur.close()

    def _rows(self, sql: str, *params: Any) -> list[Any]:
        reset_budget(self.con)
        return self.con.execute(sql, params).fetchall()

    # -- what the views ask of a LineageStore, with its answers and errors -------------------
    def get_run(self, run_id: str) -> dict[str, Any]:
        """The run's ``id`` and ``name`` (a prefix matches as :meth:`LineageStore.get_run`'s)."""
        rows = self._rows("SELECT id, name FROM runs WHERE id LIKE ? || '%'", run_id)
        if not rows:
            raise DatabaseError(f"{self.name}: no run with id {run_id!r}; see 'qdevolve runs list --db {self.name}'")
        if len(rows) > 1:
            raise DatabaseError(f"{self.name}: run id prefix {run_id!r} is ambiguous")
        return {"id": rows[0][0], "name": rows[0][1]}

    def latest_run_id(self) -> str:
        rows = self._rows("SELECT id FROM runs ORDER BY created_at DESC LIMIT 1")
        if not rows:
            raise DatabaseError(f"{self.name}: holds no runs yet")
        return rows[0][0]

    def resolve_run(self, run_id: str | None) -> str:
        return self.get_run(run_id)["id"] if run_id else self.latest_run_id()

    def count_programs(self, run_id: str) -> int:
        return self._rows("SELECT COUNT(*) FROM programs WHERE run_id = ?", run_id)[0][0] or 0


def open_view(target: str) -> SqliteView | None:
    """A view of the SQLite file ``target`` (a normalised ``--db`` value), or ``None`` when
    it is a server URL or an older schema (the store upgrades it).

    Raises:
        DatabaseError: what :func:`qdevolve.db.store.open_store` raises for a missing, foreign
            or corrupt file (the same checks, the file untouched).
    """
    if is_url(target):
        return None
    path = Path(target)
    check_sqlite_file(path, create=False)
    if read_only_file(path):
        con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True, timeout=BUSY_TIMEOUT_S,
                              isolation_level=None)
    else:
        con = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    bound_sqlite(con)  # reading commands: each statement's database time is bounded
    try:
        con.execute(f"PRAGMA cache_size={-_SCAN_CACHE_KIB}")
        con.execute("BEGIN")  # one snapshot for every scan (the store's readers use deferred BEGIN too)
        version = con.execute("SELECT MAX(version) FROM qdevolve_schema").fetchone()[0] or 0
    except BaseException:
        con.close()
        raise
    if version < SCHEMA_VERSION:
        con.close()
        return None
    return SqliteView(path, con)
