"""A database file may come from anyone: check its schema on open and bound its queries.

A SQLite file carries code of a sort: a view named like one of our tables runs its own
query (a recursive CTE never ends), a trigger runs on writes, and any column may hold any
type. :func:`check_sqlite_schema` accepts a file only when it has the core tables
(:data:`CORE_TABLES`), every table it has holds the columns :mod:`qdevolve.db.schema`
describes (the columns later versions added may be missing from an older file), and it
defines no view, trigger or virtual table. Reading commands and
``qdevolve serve`` also bound the database time of every statement (:func:`bound_sqlite`,
:func:`pg_read_options`): ``$QDEVOLVE_QUERY_TIMEOUT_S`` (default 60) seconds per statement on
SQLite, measured by a progress handler (pauses of the reader longer than a quarter second
between rows do not count, so a slow consumer of a long scan is not stopped), or
PostgreSQL's ``statement_timeout``. The bound is
on only where :func:`enable_query_budget` was called (read commands, the viewer), never
for a run's writer.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from qdevolve.errors import DatabaseError

__all__ = ["check_sqlite_schema", "bound_sqlite", "reset_budget", "enable_query_budget", "query_budget",
           "restore_query_budget", "budget_from_env",
           "pg_read_options", "INTERRUPTED", "QUERY_BUDGET_ENV"]

QUERY_BUDGET_ENV = "QDEVOLVE_QUERY_TIMEOUT_S"
DEFAULT_BUDGET_S = 60.0
_STEP = 10_000   # VM instructions between two checks (well under a millisecond)
_GAP_S = 0.25    # a longer pause between checks is time outside the VM (rows being used)
INTERRUPTED = "interrupted"  # sqlite3's message when a progress handler stops a statement

#: Columns added by a migration: an older file may lack them (``qdevolve.db._engine.migrate``).
_LATER_COLUMNS = {("evaluations", "worker")}
#: Tables every qdevolve database has; the others (policy, rollouts, leases, snapshots...) may be
#: missing from an older or partial file and then read as empty.
CORE_TABLES = frozenset({"qdevolve_schema", "runs", "programs", "edges", "evaluations", "archive_events"})
_budget_s: float | None = None


def budget_from_env() -> float:
    """``$QDEVOLVE_QUERY_TIMEOUT_S`` when it is a positive number, else 60 s."""
    try:
        seconds = float(os.environ.get(QUERY_BUDGET_ENV, DEFAULT_BUDGET_S))
    except ValueError:
        return DEFAULT_BUDGET_S
    return seconds if seconds > 0 else DEFAULT_BUDGET_S


def enable_query_budget(seconds: float | None = None) -> float | None:
    """Turn the bound on for this process (``seconds``, else :func:`budget_from_env`); returns
    the previous setting, for :func:`restore_query_budget`."""
    global _budget_s
    before = _budget_s
    _budget_s = seconds if seconds is not None and seconds > 0 else budget_from_env()
    return before


def restore_query_budget(previous: float | None) -> None:
    """Put back what :func:`enable_query_budget` returned."""
    global _budget_s
    _budget_s = previous


def query_budget() -> float | None:
    """The per-statement bound in seconds, or ``None`` when it is off."""
    return _budget_s


class _Budget:
    """The progress handler of one connection: VM time of the current statement."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.used, self.last = seconds, 0.0, None

    def reset(self) -> None:
        self.used, self.last = 0.0, None

    def __call__(self) -> int:
        now = time.monotonic()
        if self.last is not None and now - self.last < _GAP_S:
            self.used += now - self.last
        self.last = now
        return 1 if self.used > self.seconds else 0


_BUDGETS: dict[int, _Budget] = {}


def bound_sqlite(con: sqlite3.Connection, seconds: float | None = None) -> None:
    """Install the bound (``seconds``, else the process's when it is on) on ``con``."""
    seconds = seconds or _budget_s
    if seconds is None:
        return
    budget = _Budget(seconds)
    _BUDGETS[id(con)] = budget
    con.set_progress_handler(budget, _STEP)


def reset_budget(con: Any) -> None:
    """A new statement on ``con`` starts with the whole budget."""
    budget = _BUDGETS.get(id(con))
    if budget is not None:
        budget.reset()


def pg_read_options() -> str:
    """libpq ``options`` bounding each statement of a reading session (empty when off)."""
    return "" if _budget_s is None else f"-c statement_timeout={int(_budget_s * 1000)}"


def interrupted_message(name: str) -> str:
    """The one line for a statement the bound stopped."""
    return (f"{name}: a query ran longer than {_budget_s or DEFAULT_BUDGET_S:g} s of database time and was "
            f"stopped; the database may be crafted (set {QUERY_BUDGET_ENV} to allow longer queries)")


def check_sqlite_schema(con: sqlite3.Connection, path: Path | str, version: int) -> None:
    """Refuse a file whose schema is not qdevolve's: a view, a trigger, a virtual table, a
    missing table or column of :mod:`qdevolve.db.schema` (one line naming the object).

    Args:
        con: An open (read-only) connection to the file.
        path: How to name the file.
        version: The file's schema version (older files lack the later tables and columns).
    """
    from qdevolve.db._columns import TABLE_COLUMNS
    from qdevolve.db._version import SCHEMA_VERSION
    from qdevolve.textsafe import terminal_safe_line

    def name(text: Any) -> str:
        return terminal_safe_line(str(text))[:80]

    objects = con.execute("SELECT type, name, tbl_name, COALESCE(sql, '') FROM sqlite_master").fetchall()
    for kind, obj, table, sql in objects:
        if kind in ("view", "trigger"):
            raise DatabaseError(f"{path}: defines the {kind} '{name(obj)}'{'' if kind == 'view' else ' on ' + name(table)}, "
                                f"which no qdevolve database has; it may be crafted: refusing to read it")
        if kind == "table" and str(sql).lstrip().upper().startswith("CREATE VIRTUAL"):
            raise DatabaseError(f"{path}: defines the virtual table '{name(obj)}', which no qdevolve database has; "
                                "it may be crafted: refusing to read it")
    tables = {t for kind, t, _tbl, _sql in objects if kind == "table"}
    for table, columns in TABLE_COLUMNS.items():
        if table not in tables:
            if table not in CORE_TABLES:
                continue
            raise DatabaseError(f"{path}: has no table '{table}', which every qdevolve database has; "
                                "it is damaged or not written by qdevolve")
        have = {r[1] for r in con.execute(f'PRAGMA table_info("{table}")')}
        missing = [c for c in columns if c not in have
                   and not ((table, c) in _LATER_COLUMNS and version < SCHEMA_VERSION)]
        if missing:
            raise DatabaseError(f"{path}: table '{table}' lacks the column '{missing[0]}'; it is damaged "
                                "or not written by qdevolve")
