"""Pass@k training advantages (kind ``objective``, name ``passk``).

Source: Chen et al. 2025, "Pass@k Training for Adaptively Balancing Exploration and
Exploitation of Large Reasoning Models", arXiv 2508.10751; closed form read in the official
code (``RUCAIBox/Passk_Training``, ``passk_adv.py``; diversity-rl.md §8). For a group of n
completions with c correct (binary rewards)::

    rho   = 1 - C(n-c, k) / C(n, k)                            group pass@k
    sigma = sqrt(rho (1 - rho))
    A_pos = (1 - rho) / sigma                                  correct completions
    A_neg = (1 - rho - C(n-c-1, k-1) / C(n-1, k-1)) / sigma    incorrect completions

Symbols: ``C`` the binomial coefficient (0 when the lower index exceeds the upper); ``n = G``;
``k`` the pass@k budget (1 <= k <= n). At k = 1 this is GRPO's z-score with the population
std. When sigma = 0 (all correct, all wrong, or n - c < k so rho = 1) the advantages are 0:
the group already passes at k and gives no signal.

Settings: ``k`` (integer >= 1). Rewards must be binary (0 or 1).
"""

from __future__ import annotations

from math import comb, sqrt

import numpy as np

from qdevolve import registry
from qdevolve.rl._common import ObjectiveBase
from qdevolve.rl.group import RolloutGroup

__all__ = ["PassAtK"]


@registry.objective("passk")
class PassAtK(ObjectiveBase):
    """Closed-form pass@k advantages for binary rewards (see module docstring)."""

    name = "passk"
    requires = frozenset()

    def __init__(self, *, k: int = 4) -> None:
        if isinstance(k, bool) or int(k) != k or int(k) < 1:
            raise ValueError(f"k must be an integer >= 1, got {k!r}")
        self.k = int(k)

    def advantages(self, group: RolloutGroup) -> np.ndarray:
        """Pass@k advantages, float64 ``[G]``."""
        self.check(group)
        r = group.rewards
        if not np.all((r == 0.0) | (r == 1.0)):
            raise ValueError(
                f"objective 'passk' needs binary rewards (0 or 1); group {group.prompt_id!r} has "
                f"{sorted(set(r.tolist()))[:5]}; threshold graded rewards before building the group"
            )
        n, k = group.size, self.k
        if k > n:
            raise ValueError(
                f"objective 'passk' has k={k} but the group has only G={n} completions"
            )
        c = int(r.sum())
        rho = 1.0 - comb(n - c, k) / comb(n, k)
        var = rho * (1.0 - rho)
        if var <= 0.0:
            return np.zeros(n, dtype=np.float64)
        sigma = sqrt(var)
        a_pos = (1.0 - rho) / sigma
        a_neg = (1.0 - rho - comb(n - c - 1, k - 1) / comb(n - 1, k - 1)) / sigma if n > 1 else 0.0
        return np.where(r == 1.0, a_pos, a_neg).astype(np.float64)
