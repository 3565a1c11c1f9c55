"""Parent-selection rules (plugin kind ``selection``).

Every rule implements ``select(candidates, rng, n=1) -> list[Elite]``: it draws ``n``
parents from ``candidates`` (an archive's elites, in a deterministic order) using only
``rng``, so a seeded run selects the same parents. Draws are without replacement while
``n`` does not exceed the number of candidates with non-zero probability (two crossover
parents are distinct), and with replacement beyond that. Invalid options raise
:class:`~qdevolve.errors.ConfigError` (one line in the CLI).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from qdevolve import registry
from qdevolve.errors import ConfigError
from qdevolve.types import Elite

__all__ = [
    "SelectionRule",
    "UniformSelection",
    "TournamentSelection",
    "DGMSelection",
    "PowerLawSelection",
    "NoveltyWeightedSelection",
    "weighted_draw",
    "knn_feature_novelty",
]


def weighted_draw(weights: np.ndarray, rng: np.random.Generator, n: int) -> list[int]:
    """``n`` indices drawn with probability proportional to ``weights`` (>= 0).

    Raises:
        ValueError: ``weights`` is empty, negative, not finite or sums to zero.
    """
    w = np.asarray(weights, dtype=np.float64)
    if w.size == 0:
        raise ValueError("cannot select from an empty candidate list")
    if not np.all(np.isfinite(w)) or (w < 0).any() or w.sum() <= 0:
        raise ValueError(f"selection weights must be finite, >= 0 and not all zero, got {w.tolist()}")
    p = w / w.sum()
    replace = n > int((p > 0).sum())
    return [int(i) for i in rng.choice(w.size, size=n, replace=replace, p=p)]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def knn_feature_novelty(candidates: Sequence[Elite], k: int, *, max_reference: int = 256) -> np.ndarray:
    """Mean distance of each candidate to its ``k`` nearest others in feature space.

    Features (the names every candidate has) are min-max scaled over the candidates; a
    lone candidate, or candidates without shared features, get novelty 1. Beyond
    ``max_reference`` candidates, neighbours are searched among an evenly strided,
    deterministic subset of that size (cost O(N * max_reference) instead of O(N^2)).
    """
    names = sorted(set.intersection(*(set(c.features) for c in candidates))) if candidates else []
    n = len(candidates)
    if n < 2 or not names:
        return np.ones(n)
    x = np.array([[float(c.features[f]) for f in names] for c in candidates])
    span = x.max(0) - x.min(0)
    x = (x - x.min(0)) / np.where(span > 0, span, 1.0)
    ref_idx = np.arange(n) if n <= max_reference else np.linspace(0, n - 1, max_reference).round().astype(int)
    ref_idx = np.unique(ref_idx)
    d = np.sqrt(((x[:, None, :] - x[None, ref_idx, :]) ** 2).sum(-1))
    d[ref_idx, np.arange(len(ref_idx))] = np.inf  # never your own neighbour
    kk = min(k, len(ref_idx) - 1) if n <= max_reference else min(k, len(ref_idx))
    kk = max(kk, 1)
    return np.partition(d, kk - 1, axis=1)[:, :kk].mean(1)


class SelectionRule:
    """Base class: subclasses define :meth:`weights` or override :meth:`select`."""

    name = "base"

    def weights(self, candidates: Sequence[Elite]) -> np.ndarray:
        raise NotImplementedError

    def probabilities(self, candidates: Sequence[Elite]) -> np.ndarray:
        """Selection probability of each candidate for a single draw."""
        w = np.asarray(self.weights(candidates), dtype=np.float64)
        return w / w.sum()

    def select(self, candidates: Sequence[Elite], rng: np.random.Generator, n: int = 1) -> list[Elite]:
        """Draw ``n`` parents from ``candidates``.

        Raises:
            ValueError: ``candidates`` is empty or ``n < 1``.
        """
        _check(candidates, n)
        return [candidates[i] for i in weighted_draw(self.weights(candidates), rng, n)]

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({opts})"


def _check(candidates: Sequence[Elite], n: int) -> None:
    if not candidates:
        raise ValueError("cannot select a parent from an empty candidate list")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")


@registry.selection("uniform")
class UniformSelection(SelectionRule):
    """Uniform random parent: ``p_i = 1 / N``.

    The plain MAP-Elites rule (Mouret & Clune 2015): every elite is equally likely.
    """

    name = "uniform"

    def weights(self, candidates: Sequence[Elite]) -> np.ndarray:
        return np.ones(len(candidates))


@registry.selection("tournament")
class TournamentSelection(SelectionRule):
    """Tournament selection: draw ``k`` distinct candidates uniformly, keep the best score.

    Goldberg & Deb 1991 ("A comparative analysis of selection schemes used in genetic
    algorithms"). For a single draw over distinct scores, the candidate of rank ``r``
    (1 = best) among ``N`` wins with probability ``C(N - r, k - 1) / C(N, k)``. Ties go to
    the earlier candidate. Each of ``n`` draws is a fresh tournament over the candidates
    not yet chosen (all of them once every candidate has been chosen).

    Args:
        k: Tournament size (>= 1); 1 is uniform selection.
    """

    name = "tournament"

    def __init__(self, k: int = 3) -> None:
        if int(k) < 1:
            raise ConfigError(f"tournament size k must be >= 1, got {k}")
        self.k = int(k)

    def weights(self, candidates: Sequence[Elite]) -> np.ndarray:
        from math import comb

        n = len(candidates)
        k = min(self.k, n)
        order = sorted(range(n), key=lambda i: (-candidates[i].score, i))
        w = np.zeros(n)
        for rank, i in enumerate(order, start=1):
            w[i] = comb(n - rank, k - 1) / comb(n, k)
        return w

    def select(self, candidates: Sequence[Elite], rng: np.random.Generator, n: int = 1) -> list[Elite]:
        _check(candidates, n)
        chosen: list[int] = []
        for _ in range(n):
            pool = [i for i in range(len(candidates)) if i not in chosen] or list(range(len(candidates)))
            size = min(self.k, len(pool))
            entrants = sorted(int(pool[j]) for j in rng.choice(len(pool), size=size, replace=False))
            chosen.append(max(entrants, key=lambda i: (candidates[i].score, -i)))
        return [candidates[i] for i in chosen]


@registry.selection("dgm")
class DGMSelection(SelectionRule):
    """Darwin Gödel Machine parent selection (Zhang et al. 2025, arXiv 2505.22954).

    ``p_i ∝ s_i * h_i`` with ``s_i = sigmoid(lambda * (score_i - alpha_0))`` and
    ``h_i = 1 / (1 + children_i)``, where ``children_i`` is the number of evaluated children
    of program ``i`` (``Elite.children``). The sigmoid favours good programs, the second
    factor favours programs that have rarely been expanded (a novelty bonus). DGM uses
    ``lambda = 10`` and ``alpha_0 = 0.5`` on scores in [0, 1]. With ``center="median"``
    the score is standardised as ShinkaEvolve does, ``(score_i - median) / MAD`` (MAD
    falling back to the standard deviation, then 1), so ``alpha_0`` is ignored and any
    score scale works. When every ``s_i`` underflows to 0, ``p_i ∝ h_i``.

    Args:
        lambda_: Sigmoid steepness (``lambda`` is accepted as a config key too).
        alpha_0: Sigmoid midpoint (the score that gets ``s = 0.5``).
        center: ``"fixed"`` (use ``alpha_0``) or ``"median"``.
    """

    name = "dgm"

    def __init__(self, lambda_: float = 10.0, alpha_0: float = 0.5, center: str = "fixed",
                 **options: Any) -> None:
        unknown = sorted(set(options) - {"lambda"})
        if unknown:
            raise ConfigError(f"dgm selection got unknown option(s) {unknown}; it accepts lambda, alpha_0, center")
        if "lambda" in options:
            lambda_ = options["lambda"]
        if center not in ("fixed", "median"):
            raise ConfigError(f"dgm selection center must be 'fixed' or 'median', got {center!r}")
        self.lambda_ = float(lambda_)
        self.alpha_0 = float(alpha_0)
        self.center = center

    def weights(self, candidates: Sequence[Elite]) -> np.ndarray:
        scores = np.array([c.score for c in candidates], dtype=np.float64)
        if self.center == "median":
            med = float(np.median(scores))
            scale = float(np.median(np.abs(scores - med))) or float(scores.std()) or 1.0
            z = (scores - med) / scale
        else:
            z = scores - self.alpha_0
        s = _sigmoid(self.lambda_ * z)
        h = 1.0 / (1.0 + np.array([max(c.children, 0) for c in candidates], dtype=np.float64))
        w = s * h
        return w if w.sum() > 0 else h


@registry.selection("power_law")
class PowerLawSelection(SelectionRule):
    """Rank-based power-law selection: ``p_r ∝ r^(-alpha)`` for score rank ``r`` (1 = best).

    As ShinkaEvolve's ``power_law`` parent selection (Lange et al. 2025, arXiv 2509.19349),
    a rank-based cousin of FunSearch's score-temperature sampling (Romera-Paredes et al.
    2023). ``alpha = 0`` is uniform; larger ``alpha`` exploits harder. Ranks are insensitive
    to the score scale. Equal scores take consecutive ranks in candidate order.

    Args:
        alpha: Exponent (>= 0).
    """

    name = "power_law"

    def __init__(self, alpha: float = 1.0) -> None:
        if float(alpha) < 0:
            raise ConfigError(f"power_law alpha must be >= 0, got {alpha}")
        self.alpha = float(alpha)

    def weights(self, candidates: Sequence[Elite]) -> np.ndarray:
        order = sorted(range(len(candidates)), key=lambda i: (-candidates[i].score, i))
        w = np.zeros(len(candidates))
        for rank, i in enumerate(order, start=1):
            w[i] = rank ** (-self.alpha)
        return w


@registry.selection("novelty_weighted")
class NoveltyWeightedSelection(SelectionRule):
    """Novelty-proportional selection: ``p_i ∝ (novelty_i + epsilon)``.

    ``novelty_i`` is ``Elite.novelty`` when the archive computes it for every candidate
    (the ``novelty`` archive), else the mean distance to the ``k`` nearest other candidates
    in min-max-scaled feature space, the novelty measure of Lehman & Stanley 2011
    ("Abandoning objectives: evolution through the search for novelty alone"); beyond 256
    candidates the neighbours come from an evenly strided subset (see
    :func:`knn_feature_novelty`). Optionally
    ``quality`` in [0, 1] mixes in score: ``p_i ∝ (1 - quality) * nov_i / max(nov) +
    quality * rank_weight_i`` with ``rank_weight = 1 - (r - 1) / N`` (r = score rank).

    Args:
        k: Neighbours for the feature-space novelty.
        epsilon: Floor that keeps every candidate selectable.
        quality: Weight of score in the mixture (0 = pure novelty).
    """

    name = "novelty_weighted"

    def __init__(self, k: int = 5, epsilon: float = 1e-6, quality: float = 0.0) -> None:
        if int(k) < 1:
            raise ConfigError(f"novelty_weighted k must be >= 1, got {k}")
        if not 0.0 <= float(quality) <= 1.0:
            raise ConfigError(f"novelty_weighted quality must be in [0, 1], got {quality}")
        if float(epsilon) <= 0:
            raise ConfigError(f"novelty_weighted epsilon must be > 0, got {epsilon}")
        self.k = int(k)
        self.epsilon = float(epsilon)
        self.quality = float(quality)

    def novelty(self, candidates: Sequence[Elite]) -> np.ndarray:
        if all(c.novelty is not None for c in candidates):
            return np.array([float(c.novelty) for c in candidates])  # type: ignore[arg-type]
        return knn_feature_novelty(candidates, self.k)

    def weights(self, candidates: Sequence[Elite]) -> np.ndarray:
        nov = np.nan_to_num(self.novelty(candidates), nan=0.0, posinf=0.0)
        top = nov.max() if nov.size else 0.0
        nov = nov / top if top > 0 else np.ones_like(nov)
        if self.quality > 0:
            n = len(candidates)
            order = sorted(range(n), key=lambda i: (-candidates[i].score, i))
            rank_w = np.zeros(n)
            for r, i in enumerate(order, start=1):
                rank_w[i] = 1.0 - (r - 1) / n
            nov = (1.0 - self.quality) * nov + self.quality * rank_w
        return nov + self.epsilon
