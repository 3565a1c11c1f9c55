"""Named records the store writes beside the shared types (no tuples whose length varies).

:class:`~qdevolve.types.Program`, :class:`~qdevolve.types.Rollout` and
:class:`~qdevolve.types.ArchiveEvent` are stored as they are; these records carry what
those types do not: which program an evaluation belongs to and where it ran, an extra edge,
the reward a rollout earned.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from qdevolve.types import EvalResult

__all__ = ["EvaluationRecord", "EdgeRecord", "RewardRecord", "RunCounts", "as_evaluation", "as_edge", "as_reward"]


@dataclass(frozen=True)
class EvaluationRecord:
    """One ``evaluations`` row.

    Attributes:
        program_id: The evaluated program.
        result: What the sandbox returned.
        sandbox: Sandbox type that ran it (``local``, ``bwrap``, ``docker``...).
        worker: Where it ran (``local:<thread>``, ``ray:<node>:<pid>``), from the executor.
        run_id: Filled from the program when empty.
        created_at: Defaults to the time of the write.
    """

    program_id: str
    result: EvalResult
    sandbox: str | None = None
    worker: str | None = None
    run_id: str = ""
    created_at: float | None = None


@dataclass(frozen=True)
class EdgeRecord:
    """One ``edges`` row beyond the parent edges a program implies (e.g. ``inspiration``)."""

    parent_id: str
    child_id: str
    role: str
    position: int = 0
    run_id: str = ""


@dataclass(frozen=True)
class RewardRecord:
    """The reward a rollout earned, filled in once its program is evaluated."""

    rollout_id: str
    reward: float | None
    reward_vector: list[float] | None = None
    cluster_key: str | None = None


def as_evaluation(item: EvaluationRecord | tuple[Any, ...]) -> EvaluationRecord:
    """A record from a record or a ``(program_id, result[, sandbox])`` tuple."""
    if isinstance(item, EvaluationRecord):
        return item
    if len(item) not in (2, 3):
        raise ValueError(f"an evaluation is an EvaluationRecord or (program_id, result[, sandbox]), got {item!r}")
    return EvaluationRecord(item[0], item[1], item[2] if len(item) == 3 else None)


def as_edge(item: EdgeRecord | tuple[str, str, str]) -> EdgeRecord:
    """A record from a record or a ``(parent_id, child_id, role)`` tuple."""
    if isinstance(item, EdgeRecord):
        return item
    parent, child, role = item
    return EdgeRecord(parent, child, role)


def as_reward(item: RewardRecord | tuple[Any, ...]) -> RewardRecord:
    """A record from a record or a ``(rollout_id, reward, vector, key)`` tuple."""
    if isinstance(item, RewardRecord):
        return item
    rid, reward, vector, key = item
    return RewardRecord(rid, reward, vector, key)


@dataclass(frozen=True)
class RunCounts:
    """Aggregates of one run (what a resumed engine's ledger starts from).

    Attributes:
        children: Programs other than the seed.
        children_evaluated: Of those, how many have an evaluation.
        by_status: Latest status of every evaluated program (seed included) -> count.
        seed_score: The seed's latest score.
        best_score / best_id: Highest finite ``ok`` score and its program.
    """

    children: int
    children_evaluated: int
    by_status: dict[str, int]
    seed_score: float | None
    best_score: float | None
    best_id: str | None
