"""Shared helpers of the hand-computed objective tests (tests/rl/test_objectives_*.py)."""

from __future__ import annotations

from typing import Any

import qdevolve.rl.objectives.entropic  # noqa: F401  (registers it before the entry point is installed)
from qdevolve import registry

TOL = 1e-9
EPS = 1e-4  # TRL's std epsilon


def make(name: str, **kwargs: Any) -> Any:
    """The registered objective ``name`` built with ``kwargs``."""
    return registry.objective.create({"type": name, **kwargs})
