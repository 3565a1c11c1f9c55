"""The prompt-templates page: a run's template tree (``prompt: {evolve: true}``) and, for each
template, its fitness and the programs it made (:mod:`qdevolve.prompts.evolution`).

Read-only Core selects; everything stored is adversary text: the page autoescapes it, and a
value of the wrong type (a crafted database) reads as absent. At most ``PROGRAM_LINKS``
programs are linked per template (the count is exact).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from qdevolve.prompts.evolution import TemplatePopulation, improvement_reward
from qdevolve.serve import queries as Q
from qdevolve.serve.db import ReadOnlyDB
from qdevolve.types import PromptTemplate

__all__ = ["templates_view", "template_of"]

PROGRAM_LINKS = 200


def _templates(db: ReadOnlyDB, run_id: str) -> list[PromptTemplate]:
    t = db.table("prompt_templates")
    if t is None:
        return []
    with db.engine.connect() as con:
        rows = [Q._row(r) for r in con.execute(select(t).where(t.c.run_id == run_id).order_by(t.c.seq))]
    out = []
    for r in rows:
        if not isinstance(r.get("id"), str):
            continue
        text = r.get("text")
        out.append(PromptTemplate(id=r["id"], name=str(r.get("name") or "?"), text=text if isinstance(text, str) else "",
                                  parent_id=r["parent_id"] if isinstance(r.get("parent_id"), str) else None,
                                  origin=str(r.get("origin") or "?"), status=str(r.get("status") or "?"),
                                  reason=r["reason"] if isinstance(r.get("reason"), str) else None,
                                  retires=r["retires"] if isinstance(r.get("retires"), str) else None,
                                  generation=Q.whole(r.get("generation"), 0) or 0))
    return out


Child = tuple[str, str, "tuple[bool, float | None] | None", bool, "float | None"]


def _children(db: ReadOnlyDB, run_id: str) -> list[Child]:
    """``(program id, template id, (parent ok, parent score), ok, score)`` of every evaluated
    child naming a template, in program order."""
    progs, edges, evals = db.table("programs"), db.table("edges"), db.table("evaluations")
    out: list[Child] = []
    with db.engine.connect() as con:
        results: dict[str, tuple[bool, float | None]] = {}
        if evals is not None:
            for pid, status, score in con.execute(select(evals.c.program_id, evals.c.status, evals.c.score)
                                                  .where(evals.c.run_id == run_id).order_by(evals.c.id)):
                results[pid] = (status == "ok", Q.number(score))
        first: dict[str, str] = {}
        if edges is not None:
            for child, parent in con.execute(select(edges.c.child_id, edges.c.parent_id).where(
                    edges.c.run_id == run_id, edges.c.position == 0, edges.c.role != "inspiration")):
                first.setdefault(child, parent)
        for pid, meta in con.execute(select(progs.c.id, progs.c.metadata).where(progs.c.run_id == run_id)
                                     .order_by(progs.c.seq)):
            m = Q.decode(meta, {})
            tid = m.get("template_id") if isinstance(m, dict) else None
            if isinstance(tid, str) and pid in results:
                ok, score = results[pid]
                parent = first.get(pid)
                out.append((pid, tid, results.get(parent) if parent else None, ok, score))
    return out


def templates_view(db: ReadOnlyDB, run_id: str) -> dict[str, Any]:
    """Rows in tree order (each with ``depth``), fitness, children and linked programs."""
    pop = TemplatePopulation()
    for t in _templates(db, run_id):
        pop.add(t)
    programs: dict[str, list[str]] = {}
    for pid, tid, parent, ok, score in _children(db, run_id):
        if tid in pop.templates:
            parent_score = parent[1] if isinstance(parent, tuple) and parent[0] else None
            pop.credit(tid, improvement_reward(score, parent_score, ok))
            programs.setdefault(tid, []).append(pid)
    kids: dict[str | None, list[PromptTemplate]] = {}
    for t in pop.templates.values():
        kids.setdefault(t.parent_id if t.parent_id in pop.templates else None, []).append(t)
    rows: list[dict[str, Any]] = []

    def walk(parent: str | None, depth: int) -> None:
        for t in kids.get(parent, []):
            st = pop.stats[t.id]
            made = programs.get(t.id, [])
            rows.append({"id": t.id, "parent_id": t.parent_id, "name": t.name, "origin": t.origin, "status": t.status,
                         "reason": t.reason, "text": t.text, "depth": depth, "children": st.n,
                         "fitness": st.fitness, "programs": made[:PROGRAM_LINKS], "more": max(0, len(made) - PROGRAM_LINKS)})
            if depth < 200:
                walk(t.id, depth + 1)

    walk(None, 0)
    return {"run_id": run_id, "templates": rows}


def template_of(program: dict[str, Any]) -> str | None:
    """The template id a program's metadata names (``None``: none, or not text)."""
    meta = program.get("metadata")
    tid = meta.get("template_id") if isinstance(meta, dict) else None
    return tid if isinstance(tid, str) else None
