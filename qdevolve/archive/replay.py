"""Rebuild an archive by replaying stored programs, recording metrics along the way.

The engine and ``qdevolve archive stats|plot`` rebuild an archive the same way: create it
from the run's archive spec and call ``add`` for every evaluated program in the order the
live archive saw them (``add`` is deterministic, so the result equals the live archive).
With several workers that is evaluation-completion order, not program order: sort rows
by evaluation id first (``qdevolve.cli.archive.replay_rows`` does). This module consumes
plain ``(seq, Program, EvalResult | None)`` rows and never touches the store itself.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from qdevolve import registry
from qdevolve.types import EvalResult, Program

__all__ = ["Replay", "replay"]


@dataclass
class Replay:
    """An archive rebuilt from stored rows.

    Attributes:
        archive: The rebuilt archive.
        programs: Rows seen.
        evaluated: Rows with an evaluation.
        by_status: Evaluations per status.
        events: Archive events per kind produced by the replay.
        history: ``{"evaluations", "best_score", "qd_score", "coverage", "size"}`` points.
    """

    archive: Any
    programs: int = 0
    evaluated: int = 0
    by_status: Counter[str] = field(default_factory=Counter)
    events: Counter[str] = field(default_factory=Counter)
    history: list[dict[str, Any]] = field(default_factory=list)


def _point(archive: Any, evaluated: int) -> dict[str, Any]:
    s = archive.stats()
    return {"evaluations": evaluated, "best_score": s["best_score"], "qd_score": s["qd_score"],
            "coverage": s["coverage"], "size": s["size"]}


def replay(spec: dict[str, Any] | str, rows: Iterable[tuple[int, Program, EvalResult | None]], *,
           record_every: int = 0, start: Replay | None = None) -> Replay:
    """Create the archive from ``spec`` and ``add`` every evaluated row in order.

    Args:
        spec: Archive spec (``{"type": ..., **kwargs}``).
        rows: ``(seq, program, result)`` in the order the live archive added them.
        record_every: Record a history point every this many evaluations (0: none; the
            last evaluation is always recorded when > 0).
        start: Go on from this replay (an archive restored from a snapshot with the counts
            of the rows it covers) instead of a new archive; ``rows`` are then the rest.
    """
    out = start if start is not None else Replay(archive=registry.archive.create(spec))
    for _seq, program, result in rows:
        out.programs += 1
        if result is None:
            continue
        out.evaluated += 1
        out.by_status[result.status] += 1
        for ev in out.archive.add(program, result):
            out.events[ev.kind] += 1
        if record_every and out.evaluated % record_every == 0:
            out.history.append(_point(out.archive, out.evaluated))
    if record_every and out.evaluated and (not out.history or out.history[-1]["evaluations"] != out.evaluated):
        out.history.append(_point(out.archive, out.evaluated))
    return out
