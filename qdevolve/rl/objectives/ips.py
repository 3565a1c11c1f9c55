"""IPS-GRPO: inverse-probability-scaled rewards, then GRPO (kind ``objective``, ``ips``).

Source: Sinha, Elango & Liu 2026, "Expected Return Causes Outcome-Level Mode Collapse in
Reinforcement Learning and How to Fix It with Inverse Probability Scaling", arXiv 2601.21669.
The weighting rule is **reconstructed** from third-party implementations citing the paper's
Eq. 9 (diversity-rl.md §3), with the alpha-generalisation of a third-party study::

    p_hat(o_i) = n(o_i) / G
    r~_i       = r_i / max(p_hat(o_i), eps) ** alpha
    A_i        = GRPO(r~)_i = (r~_i - mean_j r~_j) / (std_j r~_j + 1e-4)     (scale="group")

Symbols: ``o_i`` the outcome key of completion i (the answer, a semantic fingerprint, a
normalised-AST hash); ``n(o)`` how many of the group's G completions have outcome ``o``;
``eps`` a probability floor (it never binds below 1/G); ``alpha`` the scaling exponent
(1 = IPS, 0 = plain GRPO; the tabular fixed point is p_i proportional to r_i ** (1/alpha)).
Unlike GRPO an all-correct group with several outcomes has non-zero advantages: frequent
outcomes are pushed down and rare ones up, the restoring force toward reward-proportional
(for binary rewards, uniform-over-correct) distributions.

Settings: ``alpha`` (>= 0), ``eps`` (floor in [0, 1]), ``key`` ("outcome" uses
``group.outcome_keys``, "cluster" uses ``group.cluster_keys``), ``scale``, ``std_eps``,
``batch_std`` (as in ``grpo``).
"""

from __future__ import annotations

import numpy as np

from qdevolve import registry
from qdevolve.rl._common import STD_EPS, ScaledObjective, check_positive, key_counts
from qdevolve.rl.group import RolloutGroup

__all__ = ["IPS"]

_KEYS = {"outcome": "outcome_keys", "cluster": "cluster_keys"}


@registry.objective("ips")
class IPS(ScaledObjective):
    """Inverse probability scaling of rewards by in-group outcome frequency."""

    name = "ips"
    requires = frozenset({"outcome_keys"})

    def __init__(
        self,
        *,
        alpha: float = 1.0,
        eps: float = 0.0,
        key: str = "outcome",
        scale: str = "group",
        std_eps: float = STD_EPS,
        batch_std: float | None = None,
    ) -> None:
        super().__init__(scale=scale, eps=std_eps, batch_std=batch_std)
        self.alpha = check_positive("alpha", alpha, allow_zero=True)
        floor = check_positive("eps", eps, allow_zero=True)
        if floor > 1.0:
            raise ValueError(f"eps is a probability floor and must be <= 1, got {eps!r}")
        self.floor = floor
        if key not in _KEYS:
            raise ValueError(f"key must be one of {', '.join(_KEYS)}, got {key!r}")
        self.key = key
        self.requires = frozenset({_KEYS[key]})

    def scores(self, group: RolloutGroup) -> np.ndarray:
        """The scaled rewards ``r~`` (before the group baseline)."""
        keys = getattr(group, _KEYS[self.key])
        p_hat = key_counts(keys) / group.size
        return group.rewards / np.maximum(p_hat, self.floor) ** self.alpha
