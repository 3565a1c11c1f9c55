"""RL groups of the joined loop: rollouts of one prompt, complete once every member is stored.

Every rollout is stored with its reward (the engine writes both in one transaction), so a
group is complete when all the children its plan produced are stored: the breeder records
their number on each rollout (``metadata["group_n"]``). Children of several plans are
stored interleaved, so groups are read after ``last_seq`` (the watermark: every rollout at
or below it was trained or skipped), and the ids of groups above it already trained are
kept beside it; both are saved atomically with the policy version. A group still missing
members holds ``last_seq`` below its first rollout until it is complete, or released as
stale (:meth:`GroupCollector.complete`, :data:`STALE_AFTER`).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from typing import Any

import numpy as np

from qdevolve.db.store import LineageStore
from qdevolve.rl.group import RolloutGroup
from qdevolve.rl.protocols import Objective
from qdevolve.types import Rollout

__all__ = ["STALE_AFTER", "GroupCollector"]


STALE_AFTER = 16  # later plans' groups complete before an incomplete group is released


class GroupCollector:
    """Assembles complete rollout groups from the store for the trainer (module docstring).

    Args:
        store: The run's database.
        run_id: The run.
        settings: The ``train`` settings (``outcome``, ``correct_threshold``).
        objective: The trainer's objective (what a group must carry).
        last_seq: The watermark: every rollout at or below it was trained or skipped.
        done: Ids of groups above the watermark already trained (or released and skipped),
            persisted with ``last_seq`` so a resumed run never trains them again.
        stale_after: ``K``: an incomplete group is released once ``K`` groups of later plans
            are complete (:meth:`complete`).
    """

    def __init__(self, store: LineageStore, run_id: str, settings: Any, objective: Objective, *,
                 last_seq: int = 0, done: Iterable[str] = (), stale_after: int = STALE_AFTER) -> None:
        if stale_after < 1:
            raise ValueError(f"stale_after must be >= 1, got {stale_after}")
        self.store, self.run_id, self.settings, self.objective = store, run_id, settings, objective
        self.last_seq = last_seq
        self.done: set[str] = set(done)
        self.stale_after = stale_after
        self._proposed: set[str] = set()

    def complete(self) -> tuple[list[RolloutGroup], int]:
        """The groups ready to train after ``last_seq`` (two or more members) and the seq they reach.

        A group is *pending* while a member has no reward yet (a pre-v2 run) or while fewer of
        its members are stored than its plan produced (``metadata["group_n"]``, set by the
        breeder; rollouts without it, from older runs, count as complete once rewarded). A
        pending group is not trained and holds the returned watermark below its first rollout;
        complete groups after it are trained now and their ids kept (:attr:`done`, persisted
        with ``last_seq``), so they are never trained twice. An incomplete group whose plan
        will never finish (a kill while it was in flight) is released once ``stale_after``
        groups whose first rollout comes after its own are complete: it is trained if it has
        two or more members, else skipped. Members stored after a released group's ids have
        left :attr:`done` form a new incomplete group, released (or skipped) the same way.

        Call :meth:`advance` with the returned seq once the step that used the groups is saved.
        """
        rows = self.store.rollouts(self.run_id, after_seq=self.last_seq)
        by_group: dict[str, list[tuple[int, Rollout]]] = {}
        for seq, r in rows:
            by_group.setdefault(r.group_id or r.id, []).append((seq, r))
        firsts = {gid: min(seq for seq, _ in members) for gid, members in by_group.items()}
        unrewarded = {gid for gid, members in by_group.items() if any(r.reward is None for _, r in members)}
        incomplete = {gid for gid, members in by_group.items()
                      if gid not in unrewarded and len(members) < _group_n(members)}
        ready_firsts = sorted(firsts[g] for g in by_group if g not in unrewarded and g not in incomplete)
        groups: list[RolloutGroup] = []
        done: set[str] = set()
        hold: int | None = None  # the first seq of the earliest group still pending
        for gid, members in by_group.items():
            if gid in self.done:  # trained (or released) by an earlier step, above the watermark
                done.add(gid)
                continue
            if gid in unrewarded or (gid in incomplete and not self._stale(firsts[gid], ready_firsts)):
                hold = firsts[gid] if hold is None else min(hold, firsts[gid])
                continue
            done.add(gid)
            g = self._group([r for _, r in members])
            if g is not None:
                groups.append(g)
        last = max((seq for seq, _ in rows), default=self.last_seq)
        if hold is not None:
            last = min(last, hold - 1)
        # ids still above the new watermark: the done groups that have a rollout after it
        self._proposed = {gid for gid in done if max(seq for seq, _ in by_group[gid]) > last}
        return groups, max(last, self.last_seq)

    def advance(self, last: int) -> None:
        """The step that used :meth:`complete`'s groups is saved: move the watermark to ``last``."""
        self.last_seq = max(self.last_seq, last)
        self.done = set(self._proposed)

    def state(self, last: int) -> dict[str, Any]:
        """The persisted ``joined`` state once :meth:`complete`'s groups are trained."""
        return {"last_seq": max(self.last_seq, last), "done": sorted(self._proposed)}

    def _stale(self, first: int, ready_firsts: list[int]) -> bool:
        later = len(ready_firsts) - bisect.bisect_right(ready_firsts, first)
        return later >= self.stale_after

    def _group(self, members: list[Rollout]) -> RolloutGroup | None:
        rs = [r for r in members if r.token_ids]
        _align_vectors(rs)
        if len(rs) < 2:
            return None
        g = RolloutGroup.from_rollouts(rs, outcome=self.outcome_key)
        if ("candidate_vectors" in self.objective.requires
                and g.candidate_vectors is None and g.reward_vectors is not None):
            # one program per completion: a set of m = 1 candidates (VPO with m = 1)
            g.candidate_vectors = np.asarray(g.reward_vectors, dtype=float)[:, None, :]
        g.metadata["prompt_token_ids"] = list(rs[0].prompt_token_ids)
        return g

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


def _group_n(members: list[tuple[int, Rollout]]) -> int:
    """How many members the group's plan produced (0 when its rollouts do not say: older runs)."""
    ns = [r.metadata.get("group_n") for _, r in members if isinstance(r.metadata, dict)]
    return max((int(n) for n in ns if isinstance(n, int) and not isinstance(n, bool)), default=0)


def _align_vectors(rs: list[Rollout]) -> None:
    """Rewarded before the first per-test vector was seen: widen scalar-filled vectors."""
    lengths = {len(r.reward_vector) for r in rs if r.reward_vector is not None}
    if len(lengths) > 1:
        width = max(lengths)
        for r in rs:
            if r.reward_vector is not None and len(r.reward_vector) != width:
                r.reward_vector = [float(r.reward or 0.0)] * width
