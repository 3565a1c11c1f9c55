"""Orders over objective vectors: Pareto dominance, NSGA-II ranks and crowding, lexicographic.

Every function takes vectors already *signed for maximisation* (:func:`signed`: an objective
to minimise is negated), so "larger is better" holds on every axis.

NSGA-II (Deb, Pratap, Agarwal & Meyarivan 2002, "A fast and elitist multiobjective genetic
algorithm: NSGA-II", IEEE TEC 6(2)):

* ``a`` *dominates* ``b`` when ``a_m >= b_m`` for every objective ``m`` and ``a_m > b_m`` for
  at least one.
* *Non-dominated sorting* gives rank 0 to the points no other point dominates, rank 1 to the
  points dominated only by rank-0 points, and so on (the paper's fast sort: each point's
  domination count ``n_p`` and dominated set ``S_p``, peeled front by front, O(M N^2)).
* The *crowding distance* of point ``i`` inside one front is
  ``d_i = sum_m (f_m[next_m(i)] - f_m[prev_m(i)]) / (f_m^max - f_m^min)``, where ``prev_m`` and
  ``next_m`` are its neighbours when the front is sorted by objective ``m``; the two ends
  of each objective get ``d = inf``, and an objective on which the whole front is equal adds
  nothing. Sorting ties are broken by position, so the result is a pure function of the input.
* The *crowded comparison* prefers the lower rank, then the larger crowding distance.

The lexicographic order (the ``order: lexicographic`` of the ``pareto`` archive) compares the
objectives in a declared priority: the first decides, the next breaks its ties, and so on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["DIRECTIONS", "signed", "dominates", "non_dominated_ranks", "crowding_distances",
           "crowded_key", "lexicographic_ranks"]

#: The directions an objective may have.
DIRECTIONS: tuple[str, ...] = ("max", "min")

Vector = Sequence[float]


def signed(values: Mapping[str, float], directions: Mapping[str, str]) -> tuple[float, ...]:
    """``values`` in the order of ``directions``, negated where the direction is ``min``."""
    return tuple(float(values[n]) if d == "max" else -float(values[n]) for n, d in directions.items())


def dominates(a: Vector, b: Vector) -> bool:
    """Whether ``a`` Pareto-dominates ``b`` (no worse on every objective, better on one)."""
    better = False
    for x, y in zip(a, b, strict=True):
        if x < y:
            return False
        better = better or x > y
    return better


def non_dominated_ranks(points: Sequence[Vector]) -> list[int]:
    """NSGA-II's non-dominated sort: each point's rank (0 = not dominated by any).

    The domination counts ``n_p`` and sets ``S_p`` of the paper's fast sort come from one
    (N, N) dominance matrix (numpy), then fronts are peeled: O(M N^2) work, vectorised."""
    n = len(points)
    if n == 0:
        return []
    p = np.asarray(points, dtype=np.float64)
    ge = np.ones((n, n), dtype=bool)
    gt = np.zeros((n, n), dtype=bool)
    for m in range(p.shape[1]):  # one (N, N) comparison per objective
        col = p[:, m]
        ge &= col[:, None] >= col[None, :]
        gt |= col[:, None] > col[None, :]
    dom = ge & gt  # dom[i, j]: i dominates j
    count = dom.sum(0, dtype=np.int64)  # n_p
    ranks = np.full(n, -1, dtype=np.int64)
    rank = 0
    front = np.flatnonzero(count == 0)
    while front.size:
        ranks[front] = rank
        count = count - dom[front].sum(0, dtype=np.int64)
        count[ranks >= 0] = -1
        front = np.flatnonzero(count == 0)
        rank += 1
    return [int(r) for r in ranks]


def crowding_distances(points: Sequence[Vector]) -> list[float]:
    """The crowding distance of each point of one front (``inf`` at each objective's ends)."""
    n = len(points)
    if n == 0:
        return []
    if n <= 2:
        return [float("inf")] * n
    dist = [0.0] * n
    for m in range(len(points[0])):
        order = sorted(range(n), key=lambda i: (points[i][m], i))
        lo, hi = points[order[0]][m], points[order[-1]][m]
        if hi == lo:
            continue
        dist[order[0]] = dist[order[-1]] = float("inf")
        for k in range(1, n - 1):
            i = order[k]
            if dist[i] != float("inf"):
                dist[i] += (points[order[k + 1]][m] - points[order[k - 1]][m]) / (hi - lo)
    return dist


def crowded_key(rank: int, crowding: float) -> tuple[int, float]:
    """Sort key of the crowded comparison: smaller is better (lower rank, then wider spacing)."""
    return rank, -crowding


def lexicographic_ranks(points: Sequence[Vector]) -> list[int]:
    """Each point's place in the lexicographic order (0 = best; equal vectors share a place).

    The vectors' components must already be in priority order (the first decides)."""
    order = sorted(range(len(points)), key=lambda i: tuple(-x for x in points[i]))
    ranks = [0] * len(points)
    place = 0
    for k, i in enumerate(order):
        if k and tuple(points[i]) != tuple(points[order[k - 1]]):
            place = k
        ranks[i] = place
    return ranks
