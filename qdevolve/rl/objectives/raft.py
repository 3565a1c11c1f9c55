"""RAFT: reward-ranked fine-tuning as a best-of-group filter (kind ``objective``, ``raft``).

Source: Dong et al. 2023, "RAFT: Reward rAnked FineTuning for Generative Foundation Model
Alignment", arXiv 2304.06767; and Xiong et al. 2025, arXiv 2504.11343 (RAFT as a baseline for
LLM reasoning). Loss **reconstructed** (diversity-rl.md §2.5): sample G completions, keep the
best-rewarded ones, minimise their negative log-likelihood. As a per-completion weight::

    A_i = 1   if r_i = max_j r_j  and  r_i > threshold
    A_i = 0   otherwise

Symbols: ``r_i`` the scalar reward of completion i of a group of G; ``threshold`` the reward a
kept completion must exceed (default 0: with binary rewards every correct completion is kept
and all-wrong groups give nothing). Fed to the trainer's surrogate with ratio 1 the gradient
is the NLL gradient of the kept completions (SFT on the filtered samples). Unlike GRPO an
all-correct group is *not* zero: every completion is reinforced, which is why RAFT is the
fastest-collapsing control in the experiments (positive-only sharpening).

Settings: ``threshold``.
"""

from __future__ import annotations

import numpy as np

from qdevolve import registry
from qdevolve.rl._common import ObjectiveBase
from qdevolve.rl.group import RolloutGroup

__all__ = ["RAFT"]


@registry.objective("raft")
class RAFT(ObjectiveBase):
    """Best-of-group rejection-sampling fine-tuning weights (see module docstring)."""

    name = "raft"
    requires = frozenset()

    def __init__(self, *, threshold: float = 0.0) -> None:
        t = float(threshold)
        if not np.isfinite(t):
            raise ValueError(f"threshold must be finite, got {threshold!r}")
        self.threshold = t

    def advantages(self, group: RolloutGroup) -> np.ndarray:
        """1.0 for the group's best completions above the threshold, else 0.0; ``[G]``."""
        self.check(group)
        r = group.rewards
        best = r.max()
        return ((r == best) & (r > self.threshold)).astype(np.float64)
