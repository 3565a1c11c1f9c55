"""Copies as rollouts: a child equal to its parent or to a stored program is not evaluated
and not stored as a program, but in a joined run it is still a sample of the policy. Its
rollout is stored with the reward a :class:`~qdevolve.evolve.core.hooks.DuplicateRewarding`
listener gives it (the copied program's reward, then the lazy/duplicate penalty of
:mod:`qdevolve.rl.shaping`) and points at the program it copies.

The copies of one plan are a unit of work like a ``tell``: their rollouts are committed in one
transaction together with the run state the plan left (random state, bandit, usage,
counters), so a run killed after the commit resumes after the plan (it is not made again,
its rollouts are not written twice) and one killed before it makes the same plan again.
"""

from __future__ import annotations

from typing import Any

from qdevolve.evolve.core.breeder import Child, ChildPlan
from qdevolve.evolve.core.hooks import DuplicateRewarding
from qdevolve.evolve.training import Reward, RewardCounting

__all__ = ["tell_copies", "copy_rollouts"]


def copy_rollouts(engine: Any, plan: ChildPlan) -> list[tuple[Child, Reward]]:
    """Each copy of ``plan`` whose original is stored, with its rollout pointed at the original
    and rewarded (nothing is written). Empty without a :class:`DuplicateRewarding` listener."""
    if not isinstance(engine.listener, DuplicateRewarding):
        return []
    out = []
    for child in plan.duplicates:
        original_id = engine.store.find_code_hash(engine.run_id, child.program.code_hash)
        if original_id is None or child.rollout is None:  # the original is in flight in another job
            continue
        original, result = engine.cache.get(original_id)
        r = engine.listener.duplicate_reward(child.program, original, result)
        ro = child.rollout
        ro.program_id, ro.reward, ro.reward_vector, ro.cluster_key = original_id, r.reward, r.vector, r.cluster_key
        ro.metadata = {**ro.metadata, "duplicate_of": original_id}
        out.append((child, r))
    return out


def tell_copies(engine: Any, plan: ChildPlan) -> None:
    """Store the rollouts of ``plan``'s copies after its siblings are told, with the run state
    (``engine.run_state()``) in the same transaction; then count their rewards."""
    copies = copy_rollouts(engine, plan)
    if not copies:
        return
    engine.store.write(run_id=engine.run_id, rollouts=[c.rollout for c, _ in copies], state=engine.run_state())
    if isinstance(engine.listener, RewardCounting):  # counted once stored
        for child, r in copies:
            engine.listener.count_reward(child.program, r)
