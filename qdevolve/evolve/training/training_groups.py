"""RL groups of the joined loop: rollouts of one prompt, complete once every member is rewarded.

Every rollout is stored with its reward (the engine writes both in one transaction), so a
group is complete when all the children its plan kept are stored. Groups are read after
``last_seq`` (the last rollout a trainer step used, saved atomically with the policy
version); a group still missing members holds ``last_seq`` below its first rollout.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from qdevolve.db.store import LineageStore
from qdevolve.rl.group import RolloutGroup
from qdevolve.rl.protocols import Objective
from qdevolve.types import Rollout

__all__ = ["GroupCollector"]


class GroupCollector:
    """Assembles complete rollout groups from the store for the trainer (module docstring)."""

    def __init__(self, store: LineageStore, run_id: str, settings: Any, objective: Objective, *,
                 last_seq: int = 0) -> None:
        self.store, self.run_id, self.settings, self.objective = store, run_id, settings, objective
        self.last_seq = last_seq

    def complete(self) -> tuple[list[RolloutGroup], int]:
        """The complete groups after ``last_seq`` (two or more members) and the seq they reach."""
        rows = self.store.rollouts(self.run_id, after_seq=self.last_seq)
        by_group: dict[str, list[tuple[int, Rollout]]] = {}
        for seq, r in rows:
            by_group.setdefault(r.group_id or r.id, []).append((seq, r))
        groups, last = [], self.last_seq
        pending_min = None
        for members in by_group.values():
            if any(r.reward is None for _, r in members):  # a rollout of a pre-v2 run, not yet rewarded
                first = min(seq for seq, _ in members)
                pending_min = first if pending_min is None else min(pending_min, first)
                continue
            rs = [r for _, r in members if r.token_ids]
            _align_vectors(rs)
            if len(rs) >= 2:
                g = RolloutGroup.from_rollouts(rs, outcome=self.outcome_key)
                if ("candidate_vectors" in self.objective.requires
                        and g.candidate_vectors is None and g.reward_vectors is not None):
                    # one program per completion: a set of m = 1 candidates (VPO with m = 1)
                    g.candidate_vectors = np.asarray(g.reward_vectors, dtype=float)[:, None, :]
                g.metadata["prompt_token_ids"] = list(rs[0].prompt_token_ids)
                groups.append(g)
            last = max(last, max(seq for seq, _ in members))
        if pending_min is not None:
            last = min(last, pending_min - 1)
        return groups, last

    def outcome_key(self, r: Rollout) -> str:
        """IPS's outcome identity: the completion text, or its behaviour (tests and reward)."""
        if self.settings.outcome == "behaviour":
            return f"{r.reward_vector}|{r.reward}"
        return r.completion.strip()

    def diversity(self, groups: list[RolloutGroup]) -> dict[str, float]:
        """D_n (distinct correct outcomes), mean reward and distinct clusters of a batch."""
        correct = set()
        for g in groups:
            keys = g.outcome_keys if g.outcome_keys is not None else [None] * g.size
            for i in range(g.size):
                key = keys[i] if keys[i] is not None else str(g.cluster_keys[i]) if g.cluster_keys is not None else i
                if float(g.rewards[i]) >= self.settings.correct_threshold:
                    correct.add(key)
        rewards = np.concatenate([np.asarray(g.rewards, dtype=float) for g in groups])
        return {"D_n": float(len(correct)), "mean_reward": float(rewards.mean()),
                "distinct_clusters": float(len({str(k) for g in groups for k in (g.cluster_keys or [])}))}


def _align_vectors(rs: list[Rollout]) -> None:
    """Rewarded before the first per-test vector was seen: widen scalar-filled vectors."""
    lengths = {len(r.reward_vector) for r in rs if r.reward_vector is not None}
    if len(lengths) > 1:
        width = max(lengths)
        for r in rs:
            if r.reward_vector is not None and len(r.reward_vector) != width:
                r.reward_vector = [float(r.reward or 0.0)] * width
