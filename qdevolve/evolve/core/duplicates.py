"""Copies as rollouts: a child equal to its parent or to a stored program is not evaluated
and not stored as a program, but in a joined run it is still a sample of the policy. Its
rollout is stored with the reward a :class:`~qdevolve.evolve.core.hooks.DuplicateRewarding`
listener gives it (the copied program's reward, then the lazy/duplicate penalty of
:mod:`qdevolve.rl.shaping`) and points at the program it copies.
"""

from __future__ import annotations

from typing import Any

from qdevolve.evolve.core.breeder import ChildPlan
from qdevolve.evolve.core.hooks import DuplicateRewarding
from qdevolve.evolve.training import RewardCounting

__all__ = ["tell_copies"]


def tell_copies(engine: Any, plan: ChildPlan) -> None:
    """Store the rollout of each copy ``plan``'s operator proposed, after its siblings are told.

    Without a :class:`DuplicateRewarding` listener, or when the copied program is not stored
    yet (in flight in another job), nothing is written.
    """
    if not isinstance(engine.listener, DuplicateRewarding):
        return
    for child in plan.duplicates:
        original_id = engine.store.find_code_hash(engine.run_id, child.program.code_hash)
        if original_id is None or child.rollout is None:
            continue
        original, result = engine.cache.get(original_id)
        r = engine.listener.duplicate_reward(child.program, original, result)
        ro = child.rollout
        ro.program_id, ro.reward, ro.reward_vector, ro.cluster_key = original_id, r.reward, r.vector, r.cluster_key
        ro.metadata = {**ro.metadata, "duplicate_of": original_id}
        engine.store.write(run_id=engine.run_id, rollouts=[ro])
        if isinstance(engine.listener, RewardCounting):  # counted once stored
            engine.listener.count_reward(child.program, r)
