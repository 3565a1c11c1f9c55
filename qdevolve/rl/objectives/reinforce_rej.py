"""Reinforce-Rej: REINFORCE with ±1 rewards on groups that are neither all-correct nor all-wrong.

Kind ``objective``, name ``reinforce_rej``. Source: Xiong et al. 2025, "A Minimalist Approach
to LLM Reasoning: from Rejection Sampling to Reinforce", arXiv 2504.11343. The paper scores a
response +1 when the verifier accepts it and -1 otherwise, and Reinforce-Rej discards every
prompt whose responses are all correct or all incorrect before a REINFORCE-style clipped
update with the reward itself as advantage (no baseline, no std normalisation; the filter is
from the abstract, the rest reconstructed in diversity-rl.md §2.5)::

    s_i        = +1 if r_i >= tau else -1                  (reward="sign", default)
    keep(g)    = (some s_i = +1) and (some s_j = -1)
    A_i        = keep(g) · (s_i - b),   b = 0 (baseline="none", default) or mean_j s_j ("mean")

Symbols: ``r_i`` the scalar reward of completion i of a group of G; ``tau`` the
``correct_threshold`` (default 1.0: rewards in [0, 1] with 1 = fully correct); ``b`` the
baseline. Wrong answers are pushed down with advantage -1 (with a 0/1 reward they would get
0 and only correct answers would move, which is RAFT, not Reinforce). ``reward="raw"`` uses
``s_i = r_i`` and rejects groups of zero reward variance instead (graded rewards).

Filtering as published removes rejected prompts from the batch, so they do not dilute a
token-level normaliser. :meth:`ReinforceRej.select_groups` does that: a trainer calls it on
a batch before computing the loss (an optional objective member; without it rejected groups
stay in the batch with all-zero advantages, which is the same gradient direction under the
per-sequence ``grpo`` aggregation but a smaller step under ``bnpo``/``dapo``).

Settings: ``baseline`` in {"none", "mean"}, ``reward`` in {"sign", "raw"}, ``correct_threshold``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from qdevolve import registry
from qdevolve.rl._common import ObjectiveBase
from qdevolve.rl.group import RolloutGroup

__all__ = ["ReinforceRej"]

_BASELINES = ("none", "mean")
_REWARDS = ("sign", "raw")


@registry.objective("reinforce_rej")
class ReinforceRej(ObjectiveBase):
    """REINFORCE with ±1 rewards and rejection of all-correct / all-wrong groups."""

    name = "reinforce_rej"
    requires = frozenset()

    def __init__(self, *, baseline: str = "none", reward: str = "sign",
                 correct_threshold: float = 1.0) -> None:
        if baseline not in _BASELINES:
            raise ValueError(f"baseline must be one of {', '.join(_BASELINES)}, got {baseline!r}")
        if reward not in _REWARDS:
            raise ValueError(f"reward must be one of {', '.join(_REWARDS)}, got {reward!r}")
        tau = float(correct_threshold)
        if not np.isfinite(tau):
            raise ValueError(f"correct_threshold must be finite, got {correct_threshold!r}")
        self.baseline = baseline
        self.reward = reward
        self.correct_threshold = tau

    def signed_rewards(self, group: RolloutGroup) -> np.ndarray:
        """``s_i``: +1 / -1 by correctness (``reward="sign"``), or the raw rewards."""
        if self.reward == "raw":
            return group.rewards.copy()
        return np.where(group.rewards >= self.correct_threshold, 1.0, -1.0)

    def rejected(self, group: RolloutGroup) -> bool:
        """True when every completion is correct or every one is wrong (zero variance if raw)."""
        s = self.signed_rewards(group)
        return bool(np.all(s == s[0]))

    def select_groups(self, groups: Sequence[RolloutGroup]) -> list[RolloutGroup]:
        """The groups a published Reinforce-Rej update trains on (rejected ones removed)."""
        return [g for g in groups if not self.rejected(g)]

    def advantages(self, group: RolloutGroup) -> np.ndarray:
        """``s_i`` (or ``s_i - mean s``); zeros for a rejected group. float64 ``[G]``."""
        self.check(group)
        s = self.signed_rewards(group)
        if self.rejected(group):
            return np.zeros_like(s)
        if self.baseline == "mean":
            return s - s.mean()
        return s
