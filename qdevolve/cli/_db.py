"""The ``--db`` option every command shares: a SQLite path or a SQLAlchemy URL.

The value may also come from the ``QDEVOLVE_DB`` environment variable (handy for a
PostgreSQL URL with a password, which then never appears in the shell history). It is
normalised once (:func:`qdevolve.db._open.normalize_target`): a URL is never taken as a path,
``sqlite:///file`` becomes the file, and whatever a command prints about the database goes
through :func:`shown`, which masks a URL's password.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from qdevolve.db._open import display_target, is_url, normalize_target
from qdevolve.errors import ConfigError
from qdevolve.textsafe import terminal_safe_line

__all__ = ["DB_ENV", "db_option", "shown", "target", "check_new_run", "is_sqlite_path"]

DB_ENV = "QDEVOLVE_DB"
DB_HELP = (f"Lineage database: a .sqlite path or a SQLAlchemy URL such as "
           f"postgresql+psycopg://USER:PASSWORD@HOST/DB (default: ${DB_ENV}).")


def target(value: str) -> str:
    """The store target for a ``--db`` value (see :func:`normalize_target`)."""
    return normalize_target(value)


def is_sqlite_path(value: str) -> bool:
    """True for a SQLite file target (after :func:`target`), False for a server URL."""
    return not is_url(value)


def check_new_run(value: str) -> None:
    """For ``qdevolve run``: an existing SQLite file is refused (resume it instead); a server
    URL may hold other runs (each run has its own id), so it is accepted. A 0-byte file is an
    empty database to SQLite (e.g. one made by ``touch`` or ``mktemp``): a new run starts in it.

    Raises:
        ConfigError: the file exists and is not empty; the hint names it with any password masked.
    """
    path = Path(value)
    if is_sqlite_path(value) and path.exists() and not (path.is_file() and path.stat().st_size == 0):
        raise ConfigError(f"{shown(value)}: already exists; continue it with 'qdevolve resume --db "
                          f"{shown(value)}' or pass a new --db path")


def shown(value: Any) -> str:
    """A database target as it may be printed: the password masked, control characters escaped."""
    return terminal_safe_line(display_target(str(value)))


def _callback(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Normalise the value; a bad one raises :class:`DatabaseError` (one line, exit 2)."""
    return None if value is None else target(value)


def db_option(*, required: bool = True, help: str = DB_HELP) -> Callable[[Any], Any]:
    """``--db`` (also ``$QDEVOLVE_DB``); the command receives the normalised target string."""
    return click.option("--db", "db", required=required, envvar=DB_ENV, show_envvar=False,
                        callback=_callback, help=help, metavar="PATH|URL")
