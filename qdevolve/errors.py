"""Errors users see. Every message says what was wrong, where, and what to do."""

from __future__ import annotations

__all__ = ["QdevolveError", "ConfigError", "DatabaseError", "PluginError", "EvaluationSetupError", "RunAborted"]


class QdevolveError(Exception):
    """Base class of user-facing errors; the CLI prints the message on one line and exits 2."""

    exit_code = 2


class ConfigError(QdevolveError):
    """A config file, field or command-line value is invalid."""


class DatabaseError(QdevolveError):
    """A path is not a usable qdevolve lineage database."""


class PluginError(QdevolveError):
    """A plugin could not be found, loaded or checked against its kind's protocol."""


class EvaluationSetupError(QdevolveError):
    """An example directory, seed program or evaluator cannot be used."""


class RunAborted(QdevolveError):
    """The run cannot go on (backend unreachable, every child failing alike, cluster gone).

    The engine marks the run stopped (resumable) and the CLI prints the message on one line
    and exits 1.
    """

    exit_code = 1
