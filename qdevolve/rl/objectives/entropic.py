"""Entropic: leave-one-out exponential weights with a per-group KL budget (``entropic``).

Kind ``objective``. Source: "Learning to Discover at Test Time"
(TTT-Discover), arXiv 2601.16175; formula read in the authors' code
(``test-time-training/discover``, ``tinker_cookbook/rl/train.py``, ``compute_advantages``,
estimators ``entropic`` and ``entropic_adaptive_beta``; joined-anchors.md). Discovery wants
the *maximum* reward of a group, not its mean, so the advantage is a risk-seeking
(entropic-utility) weight::

    e_i   = exp(beta (r_i - max_j r_j))                       (shifted for stability)
    Z_i   = (sum_{j != i} e_j) / (G - 1)                      leave-one-out mean
    A_i   = e_i / (Z_i + 1e-12) - 1

With ``beta=None`` (default, the paper's adaptive setting) beta is solved per group so that
the tilted distribution ``q_beta(i) = e_i / sum_j e_j`` over the group's completions sits at a
fixed KL budget from uniform::

    KL(q_beta || uniform) = sum_i q_beta(i) log(G q_beta(i)) = delta,     delta = ln 2

by doubling an upper bracket from beta = 1 while the KL stays below delta (up to
``beta_max``), then ``iters`` bisection steps (the authors' search: 60 steps, ``beta_max``
1e6). KL grows with beta toward ``log(G / n_max)`` (``n_max`` completions share the maximum),
so when that limit is at most delta (e.g. half the group is correct under a binary reward)
the search ends at the bracket it reached (best effort, as the authors' code). Symbols:
``r_i`` the reward of completion i of a group of G; ``beta`` the inverse temperature (large:
only the best completions are pushed up, every other one gets about -1; small: ``A_i ≈ beta
(r_i - mean_{j != i} r_j)``, a scaled leave-one-out REINFORCE). The adaptive beta makes the
advantages invariant to the reward's scale. All-equal rewards and G = 1 give zeros.

Settings: ``beta`` (a fixed inverse temperature > 0, or None for the adaptive one),
``kl_budget`` (delta, default ln 2), ``beta_max``, ``iters``. The beta of the last group
scored is kept in ``last_beta`` (for logging).
"""

from __future__ import annotations

import math

import numpy as np

from qdevolve import registry
from qdevolve.rl._common import ObjectiveBase, check_positive
from qdevolve.rl.group import RolloutGroup

__all__ = ["Entropic", "tilted_kl", "solve_beta", "loo_weights"]


def tilted_kl(rewards: np.ndarray, beta: float) -> float:
    """``KL(q_beta || uniform)`` over the G completions, ``q_beta ∝ exp(beta r)`` (nats)."""
    r = np.asarray(rewards, dtype=np.float64)
    logits = beta * (r - r.max())
    logq = logits - np.log(np.exp(logits).sum())
    return float((np.exp(logq) * (logq + math.log(r.size))).sum())


def solve_beta(rewards: np.ndarray, delta: float = math.log(2), *, beta_max: float = 1e6,
               iters: int = 60) -> float:
    """The beta with ``tilted_kl(rewards, beta) = delta`` (module docstring's search)."""
    r = np.asarray(rewards, dtype=np.float64)
    if r.size < 2:
        return 0.0
    lo, hi = 0.0, 1.0
    if tilted_kl(r, hi) < delta:
        while hi < beta_max and tilted_kl(r, hi) < delta:
            hi *= 2.0
        if tilted_kl(r, hi) < delta:
            return hi  # the budget is out of reach: best effort
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        if tilted_kl(r, mid) < delta:
            lo = mid
        else:
            hi = mid
    return hi


def loo_weights(rewards: np.ndarray, beta: float) -> np.ndarray:
    """``A_i = e_i / mean_{j != i} e_j - 1`` with ``e = exp(beta (r - max r))``, float64 ``[G]``."""
    r = np.asarray(rewards, dtype=np.float64)
    e = np.exp(beta * (r - r.max()))
    if r.size == 1:
        return np.zeros(1)
    z = (e.sum() - e) / (r.size - 1)
    return e / (z + 1e-12) - 1.0


@registry.objective("entropic")
class Entropic(ObjectiveBase):
    """TTT-Discover's leave-one-out entropic advantages (see module docstring)."""

    name = "entropic"
    requires = frozenset()

    def __init__(self, *, beta: float | None = None, kl_budget: float = math.log(2),
                 beta_max: float = 1e6, iters: int = 60) -> None:
        self.beta = None if beta is None else check_positive("beta", beta)
        self.kl_budget = check_positive("kl_budget", kl_budget)
        self.beta_max = check_positive("beta_max", beta_max)
        if isinstance(iters, bool) or int(iters) != iters or int(iters) < 1:
            raise ValueError(f"iters must be an integer >= 1, got {iters!r}")
        self.iters = int(iters)
        self.last_beta: float | None = None

    def group_beta(self, group: RolloutGroup) -> float:
        """The group's inverse temperature (fixed, or solved for the KL budget)."""
        if self.beta is not None:
            return self.beta
        return solve_beta(group.rewards, self.kl_budget, beta_max=self.beta_max, iters=self.iters)

    def advantages(self, group: RolloutGroup) -> np.ndarray:
        """Leave-one-out entropic advantages, float64 ``[G]``."""
        self.check(group)
        r = group.rewards
        if r.size < 2 or np.all(r == r[0]):
            self.last_beta = self.beta
            return np.zeros(r.size, dtype=np.float64)
        beta = self.group_beta(group)
        self.last_beta = beta
        return loo_weights(r, beta)
