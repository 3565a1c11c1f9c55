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

from qdevolve.sandbox.evaluator import check_evaluator
from qdevolve.sandbox.limits import DEFAULT_ENV, SandboxLimits, as_limits
from qdevolve.sandbox.status import Outcome, classify

__all__ = ["SandboxLimits", "as_limits", "DEFAULT_ENV", "best_available", "check_evaluator", "classify", "Outcome"]


def best_available() -> str:
    """``"bwrap"`` where bubblewrap works (probed once), else ``"local"``."""
    from qdevolve.sandbox.bwrap import bwrap_available

    return "bwrap" if bwrap_available() else "local"
