"""IPS-GRPO: inverse-probability-scaled rewards, then GRPO (kind ``objective``, ``ips``).

Source: Sinha, Elango & Liu 2026, "Expected Return Causes Outcome-Level Mode Collapse in
Reinforcement Learning and How to Fix It with Inverse Probability Scaling", arXiv 2601.21669.
The weighting rule is **reconstructed** from third-party implementations citing the paper's
Eq. 9 (diversity-rl.md §3), with the alpha-generalisation of a third-party study::

    b_i        = 1[r_i >= tau]                 (reward="binary", default)   or   r_i  (reward="raw")
    p_hat(o_i) = n(o_i) / G
    r~_i       = b_i / max(p_hat(o_i), eps) ** alpha
    A_i        = GRPO(r~)_i = (r~_i - mean_j r~_j) / (std_j r~_j + 1e-4)     (scale="group")

Symbols: ``o_i`` the outcome key of completion i (the answer, a semantic fingerprint, a
normalised-AST hash); ``n(o)`` how many of the group's G completions have outcome ``o``;
``tau`` the ``correct_threshold``; ``eps`` a probability floor (it never binds below 1/G);
``alpha`` the scaling exponent (1 = IPS, 0 = plain GRPO). The tabular fixed point of the
scaled objective is ``p_i ∝ b_i ** (1/alpha)``: uniform over the correct outcomes.

Why binary by default: the paper's guarantee is *reward-proportional* terminal
distributions. With partial-credit rewards (the fraction of tests passed) that fixed point
spreads the policy over every partially correct outcome in proportion to its credit (on the
expression task about 21 % of the mass lands on fully correct programs), and inside a group a
correct outcome seen three times (r~ = 1 / (3/G)) ranks below a unique outcome worth 0.4
(r~ = 0.4 / (1/G)). Thresholding first makes the counts act among correct outcomes only:
wrong and partial outcomes get r~ = 0 whatever their count, and the restoring force pushes
toward uniform over the correct ones. ``reward="raw"`` keeps the graded rewards (then the
fixed point is proportional to the reward, as published for graded rewards). For rewards
that are already 0/1 and ``tau`` in (0, 1] both settings agree.

Unlike GRPO an all-correct group with several outcomes has non-zero advantages: frequent
outcomes are pushed down and rare ones up.

Settings: ``alpha`` (>= 0), ``eps`` (floor in [0, 1]), ``reward`` in {"binary", "raw"},
``correct_threshold`` (tau, default 1.0), ``key`` ("outcome" uses ``group.outcome_keys``,
"cluster" uses ``group.cluster_keys``), ``scale``, ``std_eps``, ``batch_std`` (as in ``grpo``).
"""

from __future__ import annotations

import numpy as np

from qdevolve import registry
from qdevolve.rl._common import STD_EPS, ScaledObjective, check_positive, key_counts
from qdevolve.rl.group import RolloutGroup

__all__ = ["IPS"]

_KEYS = {"outcome": "outcome_keys", "cluster": "cluster_keys"}
_REWARDS = ("binary", "raw")


@registry.objective("ips")
class IPS(ScaledObjective):
    """Inverse probability scaling of (thresholded) rewards by in-group outcome frequency."""

    name = "ips"
    requires = frozenset({"outcome_keys"})

    def __init__(
        self,
        *,
        alpha: float = 1.0,
        eps: float = 0.0,
        key: str = "outcome",
        reward: str = "binary",
        correct_threshold: float = 1.0,
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
        if reward not in _REWARDS:
            raise ValueError(f"reward must be one of {', '.join(_REWARDS)}, got {reward!r}")
        tau = float(correct_threshold)
        if not np.isfinite(tau):
            raise ValueError(f"correct_threshold must be finite, got {correct_threshold!r}")
        self.key = key
        self.reward = reward
        self.correct_threshold = tau
        self.requires = frozenset({_KEYS[key]})

    def base_rewards(self, group: RolloutGroup) -> np.ndarray:
        """``b_i``: the thresholded (``reward="binary"``) or raw rewards."""
        if self.reward == "raw":
            return group.rewards
        return (group.rewards >= self.correct_threshold).astype(np.float64)

    def scores(self, group: RolloutGroup) -> np.ndarray:
        """The scaled rewards ``r~`` (before the group baseline)."""
        keys = getattr(group, _KEYS[self.key])
        p_hat = key_counts(keys) / group.size
        return self.base_rewards(group) / np.maximum(p_hat, self.floor) ** self.alpha
