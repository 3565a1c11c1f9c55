"""VPO: vector policy optimisation with Dirichlet-scalarised set rewards (``vpo``).

Kind ``objective``. Source: Bahlous-Boldi et al. 2026, "Vector Policy Optimization: Training
for Diversity Improves Test-Time Search", arXiv 2605.22817. Estimator **reconstructed** from a
research wiki quoting the paper and a toy re-implementation (diversity-rl.md §6)::

    S_g       = {y_g1 .. y_gm}                       the m candidates of rollout g
    R(S_g)    = E_{w ~ Dir(1_T)} [ max_{y in S_g} w . r(y) ]
    R^_g      = (1/K) sum_{k=1..K} max_{j=1..m} w_k . r(y_gj)     w_1..w_K shared by the group
    A_g       = (R^_g - mean_h R^_h) / (std_h R^_h + 1e-4)       (GRPO z-score, scale="group")

Symbols: ``r(y)`` the reward vector of a candidate over T tests/criteria
(``group.candidate_vectors[g, j]``); ``w_k`` Dirichlet(1, ..., 1) weights on the T-simplex;
``K`` Monte-Carlo draws; ``m`` candidates per rollout; max inside, mean outside (swapping them
loses the diversity pressure). The K draws are fresh for every group and shared by its G
rollouts; they come from one ``numpy`` generator seeded with ``seed``, so a run is
reproducible. Rollouts that emitted fewer than m candidates are padded with zero vectors
(a zero candidate never wins the max for non-negative rewards).

Settings: ``m`` (candidates per rollout, int >= 1), ``K`` (draws, int >= 1), ``seed``,
``scale``, ``eps``, ``batch_std`` (as in ``grpo``).
"""

from __future__ import annotations

import numpy as np

from qdevolve import registry
from qdevolve.rl._common import STD_EPS, ScaledObjective
from qdevolve.rl.group import RolloutGroup

__all__ = ["VPO"]


def _positive_int(name: str, value: int) -> int:
    if isinstance(value, bool) or int(value) != value or int(value) < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


@registry.objective("vpo")
class VPO(ScaledObjective):
    """Set-level advantages from shared Dirichlet scalarisations (see module docstring)."""

    name = "vpo"
    requires = frozenset({"candidate_vectors"})

    def __init__(
        self,
        *,
        m: int = 3,
        K: int = 16,  # noqa: N803 - the paper's symbol
        seed: int | None = 0,
        scale: str = "group",
        eps: float = STD_EPS,
        batch_std: float | None = None,
    ) -> None:
        super().__init__(scale=scale, eps=eps, batch_std=batch_std)
        self.m = _positive_int("m", m)
        self.K = _positive_int("K", K)
        self.seed = seed
        self._rng = np.random.default_rng(seed)

    def draw_weights(self, T: int) -> np.ndarray:  # noqa: N803
        """K Dirichlet(1) weight vectors on the T-simplex, shape ``[K, T]`` (advances the RNG)."""
        return self._rng.dirichlet(np.ones(T), size=self.K)

    @staticmethod
    def set_rewards(candidate_vectors: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """``R^_g = mean_k max_j w_k . r(y_gj)`` for ``[G, m, T]`` vectors and ``[K, T]`` weights."""
        scal = np.einsum("gmt,kt->gkm", candidate_vectors, weights)
        return scal.max(axis=2).mean(axis=1)

    def scores(self, group: RolloutGroup) -> np.ndarray:
        """The group's Monte-Carlo set rewards ``R^`` (draws K fresh shared weightings)."""
        cv = group.candidate_vectors
        assert cv is not None  # checked by require()
        if cv.shape[1] != self.m:
            raise ValueError(
                f"objective 'vpo' has m={self.m} but group {group.prompt_id!r} carries "
                f"candidate_vectors of shape {cv.shape} (m={cv.shape[1]}); pad missing candidates "
                "with zero vectors or set m to match"
            )
        if cv.shape[2] == 0:
            raise ValueError(
                "objective 'vpo' needs candidate_vectors with at least one test (T >= 1)"
            )
        return self.set_rewards(cv, self.draw_weights(cv.shape[2]))
