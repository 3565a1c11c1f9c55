"""Rare: uniqueness-weighted GRPO advantages (kind ``objective``, name ``rare``).

Source: Hu et al. 2026, "Rewarding the Rare: Uniqueness-Aware RL for Creative Problem Solving
in LLMs", arXiv 2601.08763. The paper clusters the rollouts of one problem (one group) by
high-level strategy and rewards a correct solution more when its strategy is rare. Formula
(reconstructed: the full text was not reachable; three independent secondary sources agree
that the *group-normalised GRPO advantage* is multiplied by ``w = f ** -alpha`` with ``f``
the rollout's cluster size inside its group of K rollouts, ``alpha`` in [0, 1], weights in
[K ** -alpha, 1], no running memory across steps; the value of alpha used in the paper is
not reported; one source says every signed advantage is weighted. The counting set and the
sign restriction follow the abstract, "correct but rare strategies", and are the defaults
here; the other readings are options)::

    c_i    = 1[r_i >= tau]                                  correct, tau = correct_threshold
    f_i    = |{j : k_j = k_i and c_j = c_i}|                cluster size among completions
                                                            of the same correctness
    w_i    = f_i ** (-alpha)
    A_i^G  = (r_i - mean_j r_j) / (std_j r_j + 1e-4)        GRPO (scale="group")
    A_i    = w_i · A_i^G    if A_i^G > 0                    (apply_to="positive", default)
    A_i    = A_i^G          otherwise

Symbols: ``k_i`` the cluster key of completion i (``group.cluster_keys``, from a ``cluster``
plugin: semantic class, normalised-AST hash, feature cell, embedding, LLM judge); ``alpha``
in [0, 1] (0 = GRPO; a correct completion in a strategy that c of the group's correct
completions share gets ``c ** -alpha``, a singleton keeps weight 1). With ``alpha = 1`` every
correct strategy present in a mixed group receives the same total positive advantage,
whatever its count, so the frequent strategy no longer gets the larger push (GRPO's
``dz_i ∝ p_i (r_i - r̄)``). Counting a correct completion's cluster among wrong completions
too (``count="all"``) mixes the two: with a coarse key a correct answer shares its cluster
with wrong answers about half the time and is down-weighted for their sake.

Dynamics (measured, ``benchmarks/bench_diversity.py`` drift table): for a tabular softmax the
logit step of outcome k from one group is ``sum_i A_i 1[o_i = k] - p_k sum_i A_i``. With
``alpha <= 1`` a correct answer's expected push is proportional to the chance that it
appears among the G samples, which still grows with its probability, so the favourite keeps
gaining on rarer correct answers (more slowly than under GRPO); and since only positive
advantages shrink, ``sum_i A_i < 0``, whose ``-p_k sum_i A_i`` term lifts every answer in
proportion to its probability. Neither a larger alpha nor weighting every sign reverses the
sign of that drift; weighting the *rewards* before the baseline would, but with the answer
as cluster key that is exactly ``ips`` (the constant G ** alpha cancels in the z-score).

Options kept from earlier readings of the paper: ``apply_to="all"`` weights every signed
advantage (the wrong completions' negative advantages are divided by their own cluster
sizes too); ``count="all"`` counts cluster sizes over all G completions. Because the weight
multiplies the GRPO advantage, an all-correct group still gives zeros (unlike ``ips``).

Settings: ``alpha`` (>= 0), ``apply_to`` in {"positive", "all"}, ``count`` in {"correct",
"all"}, ``correct_threshold`` (tau, default 1.0: rewards in [0, 1] with 1 = fully correct),
``scale``, ``eps``, ``batch_std`` (as in ``grpo``).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from qdevolve import registry
from qdevolve.rl._common import STD_EPS, ScaledObjective, check_positive, key_counts
from qdevolve.rl.group import RolloutGroup

__all__ = ["Rare"]

_APPLY = ("positive", "all")
_COUNT = ("correct", "all")


@registry.objective("rare")
class Rare(ScaledObjective):
    """GRPO advantages divided by the strategy's count among correct completions (alpha power)."""

    name = "rare"
    requires = frozenset({"cluster_keys"})

    def __init__(
        self,
        *,
        alpha: float = 1.0,
        apply_to: str = "positive",
        count: str = "correct",
        correct_threshold: float = 1.0,
        scale: str = "group",
        eps: float = STD_EPS,
        batch_std: float | None = None,
    ) -> None:
        super().__init__(scale=scale, eps=eps, batch_std=batch_std)
        self.alpha = check_positive("alpha", alpha, allow_zero=True)
        if apply_to not in _APPLY:
            raise ValueError(f"apply_to must be one of {', '.join(_APPLY)}, got {apply_to!r}")
        if count not in _COUNT:
            raise ValueError(f"count must be one of {', '.join(_COUNT)}, got {count!r}")
        tau = float(correct_threshold)
        if not np.isfinite(tau):
            raise ValueError(f"correct_threshold must be finite, got {correct_threshold!r}")
        self.apply_to = apply_to
        self.count = count
        self.correct_threshold = tau

    def scores(self, group: RolloutGroup) -> np.ndarray:
        return group.rewards

    def cluster_sizes(self, group: RolloutGroup) -> np.ndarray:
        """``f_i`` per completion (module docstring), float64 ``[G]``."""
        self.check(group)
        keys = group.cluster_keys or ()
        if self.count == "all":
            return key_counts(keys)
        correct = group.rewards >= self.correct_threshold
        counts = Counter(zip(keys, correct.tolist(), strict=True))
        return np.asarray([counts[(k, c)] for k, c in zip(keys, correct.tolist(), strict=True)],
                          dtype=np.float64)

    def weights(self, group: RolloutGroup) -> np.ndarray:
        """``f_i ** -alpha`` per completion."""
        return self.cluster_sizes(group) ** (-self.alpha)

    def reweight(self, group: RolloutGroup, advantages: np.ndarray) -> np.ndarray:
        w = self.weights(group)
        if self.apply_to == "positive":
            w = np.where(advantages > 0, w, 1.0)
        return advantages * w
