"""Reinforce-Rej: REINFORCE on groups that are neither all-correct nor all-wrong.

Kind ``objective``, name ``reinforce_rej``. Source: Xiong et al. 2025, "A Minimalist Approach
to LLM Reasoning: from Rejection Sampling to Reinforce", arXiv 2504.11343. The filter is from
the abstract; the advantage is **reconstructed** (diversity-rl.md §2.5: "REINFORCE-style
clipped surrogate with the raw reward as advantage (no std normalisation)")::

    keep(group) = not all_equal(r_1..r_G)          (all-correct / all-wrong groups rejected)
    A_i = keep · (r_i - b),   b = 0 (baseline="none", default) or mean_j r_j (baseline="mean")

Symbols: ``r_i`` the scalar reward of completion i of a group of G; ``b`` the baseline. With
binary rewards "all equal" is exactly "all correct or all wrong"; for graded rewards it is
zero reward variance. Rejected groups get all-zero advantages; a trainer that wants to drop
them from the token normaliser as well can ask :meth:`ReinforceRej.rejected`.

Settings: ``baseline`` in {"none", "mean"}.
"""

from __future__ import annotations

import numpy as np

from qdevolve import registry
from qdevolve.rl._common import Objective
from qdevolve.rl.group import RolloutGroup

__all__ = ["ReinforceRej"]

_BASELINES = ("none", "mean")


@registry.objective("reinforce_rej")
class ReinforceRej(Objective):
    """REINFORCE with rejection of zero-variance groups (see module docstring)."""

    name = "reinforce_rej"
    requires = frozenset()

    def __init__(self, *, baseline: str = "none") -> None:
        if baseline not in _BASELINES:
            raise ValueError(f"baseline must be one of {', '.join(_BASELINES)}, got {baseline!r}")
        self.baseline = baseline

    @staticmethod
    def rejected(group: RolloutGroup) -> bool:
        """True when every reward of the group is equal (all correct or all wrong)."""
        r = group.rewards
        return bool(np.all(r == r[0]))

    def advantages(self, group: RolloutGroup) -> np.ndarray:
        """Raw (or mean-centred) rewards; zeros for a rejected group. float64 ``[G]``."""
        self.check(group)
        r = group.rewards
        if self.rejected(group):
            return np.zeros_like(r)
        if self.baseline == "mean":
            return r - r.mean()
        return r.copy()
