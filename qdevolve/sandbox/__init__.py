"""Sandboxed evaluation of untrusted programs: ``local``, ``bwrap`` and ``docker`` backends.

The controller never runs candidate code, and inside the sandbox the candidate runs in a
process of its own: the trusted runner (non-dumpable; pid 1 of its namespace in ``local``
and ``bwrap``) calls the evaluator, which reaches the candidate through a stand-in module
that returns plain data, and writes one record on a channel only it holds (see
``docs/sandbox.md``)::

    from qdevolve import registry
    from qdevolve.sandbox import SandboxLimits, best_available

    box = registry.sandbox.create({"type": best_available()})
    result = box.evaluate(program, "examples/x/evaluator.py", SandboxLimits(wall_s=10))
    box.close()
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from qdevolve.sandbox.evaluator import check_evaluator
from qdevolve.sandbox.limits import DEFAULT_ENV, SandboxLimits, as_limits
from qdevolve.sandbox.status import Outcome, classify

__all__ = ["SandboxLimits", "as_limits", "DEFAULT_ENV", "best_available", "resolve_sandbox", "check_evaluator", "classify", "Outcome"]


def best_available() -> str:
    """``"bwrap"`` where bubblewrap works (probed once), else ``"local"``."""
    from qdevolve.sandbox.bwrap import bwrap_available

    return "bwrap" if bwrap_available() else "local"


def resolve_sandbox(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of the sandbox ``spec`` with type ``auto`` (or no type) resolved to
    :func:`best_available`: the one place ``auto`` is decided, for runs, executors' workers
    and ``qdevolve sandbox``.

    Raises:
        PluginError: the type names no registered sandbox (the message names those there are).
    """
    from qdevolve import registry

    out = dict(spec)
    if out.get("type", "auto") == "auto":
        out["type"] = best_available()
    registry.sandbox.get(out["type"])
    return out
