"""Read queries that several store methods share: parent lookup and the program streams."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Select, func, select

from qdevolve.db import _rows
from qdevolve.db import schema as S
from qdevolve.db.records import RunCounts

__all__ = ["run_counts", "parents_of", "programs_with_latest", "evaluated_in_order", "unevaluated"]


def runs_overview() -> Select[Any]:
    """Every run with its program count, evaluation count and best ``ok`` score."""
    p, e, r = S.programs, S.evaluations, S.runs
    n_prog = select(func.count()).where(p.c.run_id == r.c.id).scalar_subquery()
    n_eval = select(func.count()).where(e.c.run_id == r.c.id).scalar_subquery()
    best = select(func.max(e.c.score)).where(e.c.run_id == r.c.id, e.c.status == "ok").scalar_subquery()
    return select(r, n_prog.label("programs"), n_eval.label("evaluations"),
                  best.label("best_score")).order_by(r.c.created_at)


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


def run_counts(c: Any, run_id: str) -> RunCounts:
    """Children, evaluated children, latest status counts, seed and best score of a run."""
    p, e = S.programs, S.evaluations
    e2 = e.alias("e2")
    latest = select(func.max(e2.c.id)).where(e2.c.program_id == e.c.program_id).correlate(e).scalar_subquery()
    rows = c.execute(select(p.c.id, p.c.operator, e.c.status, e.c.score).select_from(
        e.join(p, p.c.id == e.c.program_id)).where(e.c.run_id == run_id, e.c.id == latest)
        .order_by(e.c.id)).all()
    n_prog = c.execute(select(func.count()).select_from(p).where(p.c.run_id == run_id, p.c.operator != "seed")).scalar()
    by_status: dict[str, int] = {}
    seed = best = best_id = None
    evaluated = 0
    for pid, op, status, score in rows:
        by_status[status] = by_status.get(status, 0) + 1
        if op == "seed":
            seed = score if seed is None or (score is not None and score > seed) else seed
            if score is None:
                continue
        else:
            evaluated += 1
        if status == "ok" and score is not None and (best is None or score > best):
            best, best_id = score, pid
    return RunCounts(children=int(n_prog or 0), children_evaluated=evaluated, by_status=by_status,
                     seed_score=seed, best_score=best, best_id=best_id)
