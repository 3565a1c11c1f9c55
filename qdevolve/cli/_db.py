"""The ``--db`` option every command shares: a SQLite path or a SQLAlchemy URL.

The value may also come from the ``QDEVOLVE_DB`` environment variable (handy for a
PostgreSQL URL with a password, which then never appears in the shell history). It is
normalised once (:func:`qdevolve.db._open.normalize_target`): a URL is never taken as a path,
``sqlite:///file`` becomes the file, and whatever a command prints about the database goes
through :func:`shown`, which masks a URL's password.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from qdevolve.db._open import display_target, normalize_target
from qdevolve.textsafe import terminal_safe_line

__all__ = ["DB_ENV", "db_option", "shown", "target"]

DB_ENV = "QDEVOLVE_DB"
DB_HELP = (f"Lineage database: a .sqlite path or a SQLAlchemy URL such as "
           f"postgresql+psycopg://USER:PASSWORD@HOST/DB (default: ${DB_ENV}).")


def target(value: str) -> str:
    """The store target for a ``--db`` value (see :func:`normalize_target`)."""
    return normalize_target(value)


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
