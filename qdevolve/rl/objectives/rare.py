"""Rare: uniqueness-weighted GRPO advantages (kind ``objective``, name ``rare``).

Source: Hu et al. 2026, "Rewarding the Rare: Uniqueness-Aware RL for Creative Problem Solving
in LLMs", arXiv 2601.08763. Formula **reconstructed** from a secondary source stating the
paper's equation (diversity-rl.md §4)::

    f_i    = |C(i)|                       size of completion i's strategy cluster in the group
    w_i    = f_i ** (-alpha)
    A_i    = w_i · A_i^GRPO               A^GRPO = (r_i - mean_j r_j) / (std_j r_j + 1e-4)

Symbols: ``C(i)`` the cluster of completion i under the group's ``cluster_keys`` (from a
``cluster`` plugin: AST shape, outcome hash, archive cell, embedding, LLM judge); ``alpha``
in [0, 1] (0 = GRPO; weights lie in [G^-alpha, 1], singletons keep weight 1). Secondary
sources disagree whether the weight multiplies every signed advantage or only the positive
ones: ``apply_to="all"`` (default) weights every advantage, ``apply_to="positive"`` only those
> 0. Because it multiplies the GRPO advantage, an all-correct group still gives zeros.

Settings: ``alpha`` (>= 0), ``apply_to`` in {"all", "positive"}, ``scale``, ``eps``,
``batch_std`` (as in ``grpo``).
"""

from __future__ import annotations

import numpy as np

from qdevolve import registry
from qdevolve.rl._common import STD_EPS, ScaledObjective, check_positive, key_counts
from qdevolve.rl.group import RolloutGroup

__all__ = ["Rare"]

_APPLY = ("all", "positive")


@registry.objective("rare")
class Rare(ScaledObjective):
    """GRPO advantages divided by cluster size to the power alpha."""

    name = "rare"
    requires = frozenset({"cluster_keys"})

    def __init__(
        self,
        *,
        alpha: float = 1.0,
        apply_to: str = "all",
        scale: str = "group",
        eps: float = STD_EPS,
        batch_std: float | None = None,
    ) -> None:
        super().__init__(scale=scale, eps=eps, batch_std=batch_std)
        self.alpha = check_positive("alpha", alpha, allow_zero=True)
        if apply_to not in _APPLY:
            raise ValueError(f"apply_to must be one of {', '.join(_APPLY)}, got {apply_to!r}")
        self.apply_to = apply_to

    def scores(self, group: RolloutGroup) -> np.ndarray:
        return group.rewards

    def weights(self, group: RolloutGroup) -> np.ndarray:
        """``f_i ** -alpha`` per completion."""
        self.check(group)
        return key_counts(group.cluster_keys or ()) ** (-self.alpha)

    def reweight(self, group: RolloutGroup, advantages: np.ndarray) -> np.ndarray:
        w = self.weights(group)
        if self.apply_to == "positive":
            w = np.where(advantages > 0, w, 1.0)
        return advantages * w
