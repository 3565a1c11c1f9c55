"""Read queries that several store methods share: parent lookup and the program streams."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Select, func, select

from qdevolve.db import _rows
from qdevolve.db import schema as S

__all__ = ["parents_of", "programs_with_latest", "evaluated_in_order", "unevaluated"]


def parents_of(c: Any, ids: Sequence[str]) -> dict[str, list[str]]:
    """``{child id: [parent ids in position order]}`` (inspiration edges excluded)."""
    out: dict[str, list[str]] = {}
    for i in range(0, len(ids), 500):
        q = (select(S.edges.c.child_id, S.edges.c.parent_id)
             .where(S.edges.c.child_id.in_(ids[i:i + 500]), S.edges.c.role != "inspiration")
             .order_by(S.edges.c.child_id, S.edges.c.position))
        for child, parent in c.execute(q):
            out.setdefault(child, []).append(parent)
    return out


def _result_columns() -> list[Any]:
    e = S.evaluations
    return [e.c[n] for n in _rows.RESULT_COLUMNS] + [e.c.id.label("eval_id")]


def programs_with_latest(run_id: str, after: int, batch: int) -> Select[Any]:
    """Programs after ``seq`` with their latest evaluation (outer join), in insertion order."""
    p, e = S.programs, S.evaluations
    e2 = e.alias("e2")
    latest = select(func.max(e2.c.id)).where(e2.c.program_id == p.c.id).correlate(p).scalar_subquery()
    return (select(p, *_result_columns()).select_from(p.outerjoin(e, e.c.id == latest))
            .where(p.c.run_id == run_id, p.c.seq > after).order_by(p.c.seq).limit(batch))


def evaluated_in_order(run_id: str, after: int, batch: int) -> Select[Any]:
    """Evaluated programs with their latest evaluation, in evaluation order after ``eval_id``."""
    p, e = S.programs, S.evaluations
    e2 = e.alias("e2")
    latest = select(func.max(e2.c.id)).where(e2.c.program_id == e.c.program_id).correlate(e).scalar_subquery()
    return (select(p, *_result_columns()).select_from(e.join(p, p.c.id == e.c.program_id))
            .where(e.c.run_id == run_id, e.c.id > after, e.c.id == latest).order_by(e.c.id).limit(batch))


def unevaluated(run_id: str) -> Select[Any]:
    p, e = S.programs, S.evaluations
    return (select(p).where(p.c.run_id == run_id, ~select(e.c.id).where(e.c.program_id == p.c.id).exists())
            .order_by(p.c.seq))
