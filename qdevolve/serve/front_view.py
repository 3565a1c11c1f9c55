"""The Pareto front of a run as the archive page draws it: a scatter of two objectives.

For a run whose archive is ``pareto`` (its spec names ``objectives``), every ``ok`` program
(the newest :data:`MAX_POINTS`, plus every current member) is a point at its two first
objectives' values, read from its stored metrics; the archive's current members (found by
the caller from the archive events) are marked, and among them the non-dominated ones
(NSGA-II rank 0 over the members, :mod:`qdevolve.archive.pareto_math`) form the front. The
stored spec and metrics are untrusted: a direction other than ``max``/``min``, a name that
is not text, or a value that is not a finite number leaves the view (or that point) out.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Any

from qdevolve.archive.pareto_math import DIRECTIONS, non_dominated_ranks, signed
from qdevolve.serve import queries as Q
from qdevolve.serve.db import ReadOnlyDB

__all__ = ["front_view", "MAX_POINTS"]

MAX_POINTS = 3000
MAX_OBJECTIVES = 16


def _objectives(spec: dict[str, Any]) -> dict[str, str] | None:
    obj = spec.get("objectives")
    if not isinstance(obj, dict) or not obj or len(obj) > MAX_OBJECTIVES:
        return None
    if not all(isinstance(k, str) and len(k) <= 64 and v in DIRECTIONS for k, v in obj.items()):
        return None
    return dict(obj)


def _values(metrics: Any, names: list[str]) -> dict[str, float] | None:
    if not isinstance(metrics, dict):
        return None
    out = {}
    for n in names:
        v = metrics.get(n)
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(float(v)):
            return None
        out[n] = float(v)
    return out


def front_view(db: ReadOnlyDB, run_id: str, spec: dict[str, Any], members: Collection[str]) -> dict[str, Any] | None:
    """``{objectives, axes, points, n_front, n_members}``, or ``None`` for a run without objectives.

    Each point: ``program_id``, ``objectives`` (every declared one), ``member`` (held by the
    archive now) and ``front`` (a member no other member dominates)."""
    objectives = _objectives(spec)
    if objectives is None:
        return None
    names = list(objectives)
    by_id: dict[str, dict[str, float]] = {}
    for pid, m in Q.recent_ok_metrics(db, run_id, MAX_POINTS):
        vals = _values(m, names)
        if vals is not None and isinstance(pid, str):
            by_id[pid] = vals
    missing = sorted(set(members) - set(by_id))
    for pid, m in Q.metrics_of(db, missing).items():
        vals = _values(m, names)
        if vals is not None:
            by_id[pid] = vals
    held = [pid for pid in by_id if pid in members]
    ranks = non_dominated_ranks([signed(by_id[p], objectives) for p in held])
    front = {p for p, r in zip(held, ranks, strict=True) if r == 0}
    points = [{"program_id": pid, "objectives": vals, "member": pid in members, "front": pid in front}
              for pid, vals in by_id.items()]
    return {"objectives": objectives, "axes": names[:2] if len(names) >= 2 else names * 2, "points": points,
            "n_front": len(front), "n_members": len(held)}
