"""One row mapper per table: an object to its row and back, columns taken from the table.

A :class:`Mapper` names its table; the columns it writes are the table's columns minus the
ones the database generates (autoincrement keys), in the table's order. ``to_row`` returns
a mapping keyed by column name and the mapper checks, once at import, that it covers
exactly those columns, so adding a column to ``schema.py`` without mapping it fails loudly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, Generic, TypeVar

from sqlalchemy import Table

from qdevolve.db import schema as S
from qdevolve.db._codec import dumps, finite_or_none, loads, text
from qdevolve.db.records import EdgeRecord, EvaluationRecord, as_edge, as_evaluation
from qdevolve.errors import DatabaseError
from qdevolve.types import STATUSES, ArchiveEvent, EvalResult, Program, Rollout

__all__ = ["Mapper", "PROGRAM", "EDGE", "EVALUATION", "EVENT", "ROLLOUT", "STATE", "program_from_row",
           "result_from_row", "event_from_row", "rollout_from_row", "RESULT_COLUMNS"]

T = TypeVar("T")
_INT32 = 2**31 - 1


def _int(x: Any) -> int:
    """An INTEGER column's value, clamped to the signed 32-bit range (PostgreSQL ``integer``)."""
    return max(-_INT32, min(_INT32, int(x or 0)))


@dataclass(frozen=True)
class Mapper(Generic[T]):
    """``to_row(obj, ctx) -> {column: value}`` for one table; ``columns`` in insert order."""

    table: Table
    to_row: Callable[[T, dict[str, Any]], dict[str, Any]]
    sample: Callable[[], T]

    @cached_property
    def columns(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.table.columns if not (c.primary_key and c.autoincrement is True))

    def rows(self, items: Sequence[T], ctx: dict[str, Any]) -> list[tuple[Any, ...]]:
        cols = self.columns
        out = []
        for item in items:
            row = self.to_row(item, ctx)
            out.append(tuple(row[c] for c in cols))
        return out

    def check(self) -> None:
        got = set(self.to_row(self.sample(), {"now": 0.0, "run_id": "r"}))
        if got != set(self.columns):
            raise AssertionError(f"mapper of {self.table.name}: maps {sorted(got)}, table has {sorted(self.columns)}")


# -- to rows ------------------------------------------------------------------------------
def _program_row(p: Program, ctx: dict[str, Any]) -> dict[str, Any]:
    return {"id": p.id, "run_id": p.run_id, "code": text(p.code), "language": text(p.language),
            "code_hash": p.code_hash, "generation": _int(p.generation), "island": _int(p.island),
            "operator": text(p.operator), "prompt_hash": text(p.prompt_hash),
            "policy_version": None if p.policy_version is None else _int(p.policy_version),
            "created_at": p.created_at, "metadata": dumps(p.metadata)}


def _edge_row(e: EdgeRecord, ctx: dict[str, Any]) -> dict[str, Any]:
    return {"parent_id": e.parent_id, "child_id": e.child_id, "role": e.role, "position": e.position,
            "run_id": e.run_id}


def _evaluation_row(ev: EvaluationRecord, ctx: dict[str, Any]) -> dict[str, Any]:
    r = ev.result
    return {"program_id": ev.program_id, "run_id": ev.run_id, "status": r.status,
            "score": finite_or_none(r.score), "metrics": dumps(r.metrics),
            "tests": None if r.tests is None else dumps(r.tests), "features": dumps(r.features),
            "artifacts": dumps(r.artifacts), "error": text(r.error), "runtime_s": finite_or_none(r.runtime_s) or 0.0,
            "peak_memory_mb": finite_or_none(r.peak_memory_mb), "sandbox": text(ev.sandbox),
            "worker": text(ev.worker), "created_at": ev.created_at or ctx["now"]}


def _event_row(ev: ArchiveEvent, ctx: dict[str, Any]) -> dict[str, Any]:
    return {"run_id": ev.run_id, "program_id": ev.program_id, "archive": ev.archive, "island": _int(ev.island),
            "cell": text(ev.cell), "kind": ev.kind, "replaced_id": ev.replaced_id,
            "score": finite_or_none(ev.score), "data": dumps(ev.data), "created_at": ev.created_at}


def _rollout_row(r: Rollout, ctx: dict[str, Any]) -> dict[str, Any]:
    return {"id": r.id, "run_id": r.run_id or ctx["run_id"], "program_id": r.program_id, "group_id": r.group_id,
            "policy_version": None if r.policy_version is None else _int(r.policy_version),
            "prompt": text(r.prompt), "completion": text(r.completion),
            "prompt_token_ids": dumps(r.prompt_token_ids), "token_ids": dumps(r.token_ids),
            "logprobs": dumps(r.logprobs), "reward": finite_or_none(r.reward),
            "reward_vector": None if r.reward_vector is None else dumps(r.reward_vector),
            "cluster_key": text(r.cluster_key), "finish_reason": text(r.finish_reason),
            "prompt_tokens": _int(r.prompt_tokens), "completion_tokens": _int(r.completion_tokens),
            "created_at": r.created_at, "metadata": dumps(r.metadata)}


def _state_row(kv: tuple[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
    return {"run_id": ctx["run_id"], "key": kv[0], "value": dumps(kv[1]), "updated_at": ctx["now"]}


PROGRAM: Mapper[Program] = Mapper(S.programs, _program_row, lambda: Program(code=""))
EDGE: Mapper[EdgeRecord] = Mapper(S.edges, _edge_row, lambda: EdgeRecord("a", "b", "mutation"))
EVALUATION: Mapper[EvaluationRecord] = Mapper(S.evaluations, _evaluation_row,
                                              lambda: EvaluationRecord("a", EvalResult()))
EVENT: Mapper[ArchiveEvent] = Mapper(S.archive_events, _event_row, lambda: ArchiveEvent("a", "added", "x"))
ROLLOUT: Mapper[Rollout] = Mapper(S.rollouts, _rollout_row, lambda: Rollout(prompt="", completion=""))
STATE: Mapper[tuple[str, Any]] = Mapper(S.run_state, _state_row, lambda: ("k", 1))
for _m in (PROGRAM, EDGE, EVALUATION, EVENT, ROLLOUT, STATE):
    _m.check()


# -- from rows ----------------------------------------------------------------------------
RESULT_COLUMNS = ("status", "score", "metrics", "tests", "features", "artifacts", "error", "runtime_s",
                  "peak_memory_mb")


def program_from_row(row: Any, parents: Sequence[str] = ()) -> Program:
    return Program(id=row.id, run_id=row.run_id, code=row.code, language=row.language, parent_ids=tuple(parents),
                   generation=row.generation, island=row.island, operator=row.operator,
                   prompt_hash=row.prompt_hash, policy_version=row.policy_version, created_at=row.created_at,
                   code_hash=row.code_hash, metadata=loads(row.metadata, {}))


def known_status(status: Any, error: str | None) -> tuple[str, str | None]:
    """A stored status this version does not know (a newer writer, a tampered file) reads as
    ``invalid`` with the stored value in the error, so every view keeps working."""
    if status in STATUSES:
        return status, error
    note = f"unknown stored status {str(status)[:40]!r}"
    return "invalid", note if not error else f"{note}: {error}"


def result_from_row(row: Any) -> EvalResult:
    status, error = known_status(row.status, row.error)
    return EvalResult(status=status, score=row.score, metrics=loads(row.metrics, {}), tests=loads(row.tests),
                      features=loads(row.features, {}), artifacts=loads(row.artifacts, {}), error=error,
                      runtime_s=row.runtime_s, peak_memory_mb=row.peak_memory_mb)


def event_from_row(r: Any) -> ArchiveEvent:
    return ArchiveEvent(program_id=r.program_id, kind=r.kind, archive=r.archive, island=r.island, cell=r.cell,
                        replaced_id=r.replaced_id, score=r.score, data=loads(r.data, {}), run_id=r.run_id,
                        created_at=r.created_at)


def rollout_from_row(row: Any) -> Rollout:
    return Rollout(id=row.id, run_id=row.run_id, program_id=row.program_id, group_id=row.group_id,
                   policy_version=row.policy_version, prompt=row.prompt, completion=row.completion,
                   prompt_token_ids=loads(row.prompt_token_ids, []), token_ids=loads(row.token_ids, []),
                   logprobs=loads(row.logprobs, []), reward=row.reward, reward_vector=loads(row.reward_vector),
                   cluster_key=row.cluster_key, finish_reason=row.finish_reason, prompt_tokens=row.prompt_tokens,
                   completion_tokens=row.completion_tokens, created_at=row.created_at,
                   metadata=loads(row.metadata, {}))


def resolve_batch(programs: Sequence[Program], evaluations: Sequence[Any], edges: Sequence[Any],
                  events: Sequence[ArchiveEvent], run_id: str | None,
                  lookup: Callable[[set[str]], dict[str, str]],
                  where: str) -> tuple[list[EdgeRecord], list[EvaluationRecord]]:
    """Records of one write with every run id filled in.

    Each program implies one edge per parent (role ``crossover`` for two or more parents,
    else ``mutation``; ``metadata["edge_role"]`` overrides). A row without a run id takes
    its program's: from this batch, else from ``run_id``, else looked up in the database.
    """
    run_of = {p.id: p.run_id for p in programs}
    if any(not r for r in run_of.values()):
        raise ValueError(f"program {next(k for k, v in run_of.items() if not v)} has no run_id")
    edge_recs = [EdgeRecord(parent, p.id, p.metadata.get("edge_role") or
                            ("crossover" if len(p.parent_ids) > 1 else "mutation"), i, p.run_id)
                 for p in programs for i, parent in enumerate(p.parent_ids)]
    edge_recs += [as_edge(e) for e in edges]
    evals = [as_evaluation(e) for e in evaluations]
    if not run_id:
        missing = {e.child_id for e in edge_recs if not e.run_id} | {e.program_id for e in evals if not e.run_id}
        missing |= {e.program_id for e in events if not e.run_id}
        missing -= set(run_of)
        if missing:
            run_of.update(lookup(missing))

    def rid(pid: str, what: str) -> str:
        found = run_of.get(pid) or run_id
        if not found:
            raise DatabaseError(f"{where}: {what} for unknown program id {pid}")
        return found

    edge_recs = [e if e.run_id else replace(e, run_id=rid(e.child_id, "edge")) for e in edge_recs]
    evals = [e if e.run_id else replace(e, run_id=rid(e.program_id, "evaluation")) for e in evals]
    for ev in events:
        if not ev.run_id:
            ev.run_id = rid(ev.program_id, "archive event")
    return edge_recs, evals
