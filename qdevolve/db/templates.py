"""Rows of ``prompt_templates``: the second population (:mod:`qdevolve.prompts.evolution`).

A template row is written once, in the transaction of a ``tell`` (the one after the template
was made), and never updated: ``status`` is what it was made as (``active`` or ``invalid``);
that a later template ``retires`` it is read from that later row. Its children name it in
``programs.metadata["template_id"]``.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, select

from qdevolve.db import schema as S
from qdevolve.db._codec import dumps, loads, text
from qdevolve.db._rows import Mapper, _int
from qdevolve.types import PromptTemplate

__all__ = ["TEMPLATE", "read_templates"]

MAX_STORED_TEXT = 64_000  # a template longer than this was refused anyway; keep the row bounded


def _template_row(t: PromptTemplate, ctx: dict[str, Any]) -> dict[str, Any]:
    return {"id": t.id, "run_id": ctx["run_id"], "parent_id": t.parent_id, "name": text(t.name)[:64],
            "text": text(t.text)[:MAX_STORED_TEXT], "origin": text(t.origin)[:64], "status": text(t.status)[:16],
            "reason": None if t.reason is None else text(t.reason)[:2000], "retires": t.retires,
            "generation": _int(t.generation), "metadata": dumps(t.metadata), "created_at": t.created_at}


TEMPLATE: Mapper[PromptTemplate] = Mapper(S.prompt_templates, _template_row,
                                          lambda: PromptTemplate(id="t", name="diff_user", text=""))
TEMPLATE.check()


def read_templates(c: Connection, run_id: str) -> list[PromptTemplate]:
    """The run's templates in creation order (statuses as stored)."""
    t = S.prompt_templates
    rows = c.execute(select(t).where(t.c.run_id == run_id).order_by(t.c.seq)).mappings()
    out = []
    for r in rows:
        meta = loads(r["metadata"])
        out.append(PromptTemplate(id=r["id"], name=r["name"], text=r["text"] or "", parent_id=r["parent_id"],
                                  origin=r["origin"], status=r["status"], reason=r["reason"], retires=r["retires"],
                                  generation=int(r["generation"] or 0), metadata=meta if isinstance(meta, dict) else {},
                                  created_at=float(r["created_at"] or 0.0)))
    return out
