"""Parent selection by the best child a program has produced (``best_child``).

Plugin kind ``selection``. A parent's own score predicts poorly how good its children will
be (the "metaproductivity-performance mismatch" of the Huxley-Gödel Machine, arXiv
2510.21614); TTT-Discover ("Learning to Discover at Test Time", arXiv 2601.16175; read in the
authors' code, ``tinker_cookbook/recipes/ttt/sampler.py``, ``PUCTSampler``) therefore reuses
parents by the *maximum* value their children reached, with a PUCT exploration bonus::

    Q_i     = m_i if n_i > 0 else s_i               m_i = best score among i's children
    P_i     = (N - rank_i) / sum_j (N - rank_j)     rank by own score, 0 = best
    scale   = max_j s_j - min_j s_j                 (floored at 1e-6)
    U_i     = Q_i + c · scale · P_i · sqrt(1 + T) / (1 + n_i)
    parent  = argmax_i U_i                          (ties: higher own score, then earlier)

Symbols: ``s_i`` the candidate's own score; ``n_i`` its evaluated children
(``Elite.children``, counted by the archive; ``T = sum_i n_i``); ``m_i`` the best child score
recorded with :meth:`BestChildSelection.observe_child`; ``N`` the number of candidates; ``c``
the exploration constant (the authors' default 1.0, with group size 1 in the code read). A
candidate whose children all failed keeps ``Q_i = s_i`` while its ``n_i`` still lowers its
bonus. For ``n > 1`` the draws are the ``n`` highest ``U`` (distinct candidates); with
``temperature > 0`` parents are instead drawn with probability ``∝ exp((U_i - max U) /
(temperature · scale))``, using ``rng``.

The best-child record is the rule's own state: whoever reports evaluations (the engine's
``tell``, or a training listener) calls ``observe_child(parent_ids, score)`` for every
evaluated child (``score=None`` for a failure), and ``rebuild(records)`` replays stored
(parent ids, score) pairs on resume. Without any record the rule is a rank-prior PUCT over
own scores.

Args:
    c: Exploration constant (>= 0).
    temperature: 0 for the argmax (the published rule), > 0 to sample.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from qdevolve import registry
from qdevolve.errors import ConfigError
from qdevolve.selection.rules import SelectionRule, weighted_draw
from qdevolve.types import Elite

__all__ = ["BestChildSelection"]


@registry.selection("best_child")
class BestChildSelection(SelectionRule):
    """PUCT over the best child each candidate produced (see module docstring)."""

    name = "best_child"

    def __init__(self, c: float = 1.0, temperature: float = 0.0) -> None:
        if not (math.isfinite(float(c)) and float(c) >= 0):
            raise ConfigError(f"best_child c must be finite and >= 0, got {c}")
        if not (math.isfinite(float(temperature)) and float(temperature) >= 0):
            raise ConfigError(f"best_child temperature must be finite and >= 0, got {temperature}")
        self.c = float(c)
        self.temperature = float(temperature)
        self._best: dict[str, float] = {}  # parent id -> best child score seen

    # -- the record ----------------------------------------------------------------------
    def observe_child(self, parent_ids: Sequence[str], score: float | None) -> None:
        """Record one evaluated child of ``parent_ids`` (``None``: it failed, no score)."""
        if score is None or not math.isfinite(float(score)):
            return
        for pid in parent_ids:
            prev = self._best.get(pid)
            self._best[pid] = float(score) if prev is None else max(prev, float(score))

    def rebuild(self, records: Iterable[tuple[Sequence[str], float | None]]) -> None:
        """Forget the record and replay ``(parent_ids, score)`` pairs (resume)."""
        self._best.clear()
        for parent_ids, score in records:
            self.observe_child(parent_ids, score)

    def best_child(self, program_id: str) -> float | None:
        """The best child score recorded for ``program_id``, if any."""
        return self._best.get(program_id)

    # -- the rule ------------------------------------------------------------------------
    def scores(self, candidates: Sequence[Elite]) -> np.ndarray:
        """``U_i`` per candidate (module docstring)."""
        s = np.array([c.score for c in candidates], dtype=np.float64)
        n_child = np.array([max(c.children, 0) for c in candidates], dtype=np.float64)
        N = len(candidates)
        order = sorted(range(N), key=lambda i: (-s[i], i))
        prior = np.zeros(N)
        for rank, i in enumerate(order):
            prior[i] = N - rank
        prior /= prior.sum()
        scale = max(float(s.max() - s.min()), 1e-6)
        q = np.array([self._best.get(c.program_id, s[i]) if n_child[i] > 0 else s[i]
                      for i, c in enumerate(candidates)])
        bonus = self.c * scale * prior * math.sqrt(1.0 + n_child.sum()) / (1.0 + n_child)
        return q + bonus

    def weights(self, candidates: Sequence[Elite]) -> np.ndarray:
        """Single-draw probabilities: one-hot on the argmax, or the softmax when sampling."""
        u = self.scores(candidates)
        if self.temperature > 0:
            s = np.array([c.score for c in candidates], dtype=np.float64)
            scale = max(float(s.max() - s.min()), 1e-6)
            return np.exp((u - u.max()) / (self.temperature * scale))
        w = np.zeros(len(candidates))
        w[self._ranked(candidates, u)[0]] = 1.0
        return w

    @staticmethod
    def _ranked(candidates: Sequence[Elite], u: np.ndarray) -> list[int]:
        return sorted(range(len(candidates)), key=lambda i: (-u[i], -candidates[i].score, i))

    def select(self, candidates: Sequence[Elite], rng: np.random.Generator, n: int = 1) -> list[Elite]:
        if not candidates:
            raise ValueError("cannot select a parent from an empty candidate list")
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        if self.temperature > 0:
            return [candidates[i] for i in weighted_draw(self.weights(candidates), rng, n)]
        order = self._ranked(candidates, self.scores(candidates))
        return [candidates[order[k % len(order)]] for k in range(n)]
