"""Training as a listener of the engine: how a child is rewarded, what happens after a job.

:class:`~qdevolve.evolve.core.engine.Evolution` calls a :class:`TrainingListener` (it is not an
engine subclass). The listener owns the trainer and the policy's backend; the engine
writes the reward it returns in the same transaction as the child's evaluation, so no
rollout is ever stored without its reward.

Without a listener every rollout is rewarded by :func:`score_reward`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from qdevolve.types import ArchiveEvent, EvalResult, Program

__all__ = ["Reward", "RewardCounting", "TrainingListener", "score_reward"]


@dataclass(frozen=True)
class Reward:
    """What a rollout earned: scalar reward, per-test vector (VPO) and cluster key (IPS/Rare)."""

    reward: float | None
    vector: list[float] | None = None
    cluster_key: str | None = None


@runtime_checkable
class TrainingListener(Protocol):
    """What the engine asks of a training listener.

    Attributes:
        backend: The backend serving the trained policy (the engine generates through it).
        group_size: Children per parent plan (one prompt's RL group); ``None`` keeps the
            run's ``children_per_parent``.
        max_pending: Parent plans in flight; ``None`` keeps the engine's default. Few plans in
            flight keep rollouts on-policy (trainer steps land between generations).
    """

    backend: Any
    group_size: int | None
    max_pending: int | None

    def reward(self, program: Program, result: EvalResult, events: list[ArchiveEvent],
               parent: EvalResult | None) -> Reward:
        """The reward of the rollout that produced ``program`` (called inside ``tell``)."""
        ...

    async def after_job(self, programs: list[Program]) -> None:
        """Called once every child of one plan is told; steps the trainer when due."""
        ...

    def close(self) -> None:
        """Release the trainer and backend."""
        ...


@runtime_checkable
class RewardCounting(Protocol):
    """A listener that counts the rewards it gave (sample budget, ES member fitness).

    The engine calls :meth:`count_reward` only once the rollout is stored with that reward,
    so a commit that fails (``BudgetSpent``, a crash) leaves the counts as they were.
    """

    def count_reward(self, program: Program, reward: Reward) -> None: ...


def score_reward(program: Program, result: EvalResult, events: list[ArchiveEvent],
                 parent: EvalResult | None) -> Reward:
    """The plain engine's reward: the score (``None`` unless ``ok``), tests, archive cell."""
    cell = next((e.cell for e in events if e.cell), None)
    return Reward(result.score if result.ok else None, result.tests, cell)
