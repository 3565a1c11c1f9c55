"""An agent's per-task scores for the program page and ``/api/programs/{program}``.

Agents are ordinary programs of a run (operator ``self`` for a self-modification) whose
evaluation metrics hold one score per benchmark task, held-out tasks as ``heldout/<task>``
(:func:`qdevolve.types.task_scores`). This view splits them into scoring and held-out rows,
each beside the first parent's score on the same task and the change, so a
self-modification's effect reads task by task. A program that is not an agent has no view
(``None``): its metrics stay a plain list.
"""

from __future__ import annotations

import math
from typing import Any

from sqlalchemy import select

from qdevolve.serve.db import ReadOnlyDB
from qdevolve.serve.queries import decode
from qdevolve.types import task_scores

__all__ = ["task_view"]


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(v) else None


def _latest_metrics(db: ReadOnlyDB, pid: str) -> dict[str, Any] | None:
    evals = db.table("evaluations")
    if evals is None or "metrics" not in evals.c:
        return None
    with db.engine.connect() as con:
        raw = con.execute(select(evals.c.metrics).where(evals.c.program_id == pid)
                          .order_by(evals.c.id.desc()).limit(1)).scalar()
    metrics = decode(raw, {})
    return metrics if isinstance(metrics, dict) else None


def _rows(mine: dict[str, Any], parent: dict[str, Any] | None) -> dict[str, Any]:
    rows = []
    for name in sorted(mine):
        a = _num(mine[name])
        b = None if parent is None else _num(parent.get(name))
        rows.append({"task": name, "score": mine[name], "parent": None if parent is None else parent.get(name),
                     "change": None if a is None or b is None else a - b})
    vals = [x for x in (_num(mine[n]) for n in mine) if x is not None]
    return {"rows": rows, "mean": sum(vals) / len(vals) if vals else None}


def task_view(db: ReadOnlyDB, program: dict[str, Any]) -> dict[str, Any] | None:
    """``{"scoring": {"rows", "mean"}, "heldout": {...}, "parent_id"}`` for an agent
    (``program`` as :func:`qdevolve.serve.queries.program_detail` returns it), else ``None``."""
    last = program["evaluations"][-1] if program.get("evaluations") else None
    metrics = last.get("metrics") if last else None
    tasks = task_scores(metrics, program.get("operator")) if isinstance(metrics, dict) else None
    if tasks is None or not (tasks[0] or tasks[1]):
        return None
    first = next((e["parent_id"] for e in program.get("parents", [])
                  if e.get("role") in ("mutation", "crossover") and not e.get("position")), None)
    parent_metrics = _latest_metrics(db, first) if first else None
    parent = task_scores(parent_metrics, "self") if parent_metrics is not None else None
    return {"parent_id": first if parent is not None else None,
            "scoring": _rows(tasks[0], parent[0] if parent else None),
            "heldout": _rows(tasks[1], parent[1] if parent else None)}
