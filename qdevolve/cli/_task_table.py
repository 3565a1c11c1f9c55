"""The per-task score tables ``lineage show`` prints for an agent.

An agent (a program of operator ``self``, or one whose metrics name ``heldout/<task>``) is
scored with one metric per benchmark task (:func:`qdevolve.types.task_scores`). Its scoring
tasks and its held-out tasks are printed as two small tables, each task beside its parent's
score and the change, so a self-modification's effect reads task by task. Task names were
written by an evaluator or agent: they go through :mod:`qdevolve.textsafe`.
"""

from __future__ import annotations

import math
from typing import Any

from qdevolve.cli._tree_labels import _safe

__all__ = ["task_table_lines"]

_NAME_WIDTH = 40


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(v) else None


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    x = _num(v)
    return f"{x:.4g}" if x is not None else _safe(v)[:12]


def _block(title: str, mine: dict[str, Any], parent: dict[str, Any] | None, width: int) -> list[str]:
    names = sorted(mine)
    head = f"  {title:<{width}}  {'score':>10}"
    if parent is not None:
        head += f"  {'parent':>10}  {'change':>10}"
    out = [head]
    for n in names:
        line = f"  {_safe(n)[:_NAME_WIDTH]:<{width}}  {_cell(mine[n]):>10}"
        if parent is not None:
            a, b = _num(mine[n]), _num(parent.get(n))
            change = "-" if a is None or b is None else f"{a - b:+.4g}"
            line += f"  {_cell(parent.get(n)):>10}  {change:>10}"
        out.append(line)
    vals = [x for x in (_num(mine[n]) for n in names) if x is not None]
    if len(vals) > 1:
        out.append(f"  {'(mean)':<{width}}  {sum(vals) / len(vals):>10.4g}")
    return out


def task_table_lines(tasks: tuple[dict[str, Any], dict[str, Any]],
                     parent_tasks: tuple[dict[str, Any], dict[str, Any]] | None) -> list[str]:
    """Lines of the scoring and held-out tables (``parent_tasks``: the parent's, if any)."""
    scoring, held = tasks
    p_scoring, p_held = parent_tasks if parent_tasks is not None else (None, None)
    lines = [f"task scores ({len(scoring)} scoring, {len(held)} held out"
             + (", against the parent's)" if parent_tasks is not None else ")") + ":"]
    width = max([len("held-out task"), *(min(len(_safe(n)), _NAME_WIDTH) for n in [*scoring, *held])])
    lines += _block("scoring task", scoring, p_scoring, width) if scoring else ["  (no scoring task)"]
    lines += _block("held-out task", held, p_held, width) if held else ["  (no held-out task)"]
    return lines
