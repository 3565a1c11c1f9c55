"""Greedy parent selection: always the latest best program.

The Darwin Gödel Machine's "without open-ended exploration" ablation (Zhang et al. 2025,
arXiv 2505.22954) keeps only the newest best agent and always builds on it. This rule
reproduces that choice over any archive's candidates: the highest score, ties going to
the most recently produced program (the highest generation, then the latest inserted: the
archive hands candidates in insertion order). It never draws from ``rng``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from qdevolve import registry
from qdevolve.selection.rules import SelectionRule, _check
from qdevolve.types import Elite

__all__ = ["GreedySelection"]


@registry.selection("greedy")
class GreedySelection(SelectionRule):
    """The best candidate, ties to the latest (highest generation, then latest inserted).

    ``n`` parents are the ``n`` first candidates in that order (distinct while ``n`` does not
    exceed the number of candidates, then starting over from the best). Deterministic: the
    ``rng`` is not used, so a greedy run spends no random draws on selection.
    """

    name = "greedy"

    def order(self, candidates: Sequence[Elite]) -> list[int]:
        """Candidate indices best first: score, then generation, then insertion, descending."""
        return sorted(range(len(candidates)),
                      key=lambda i: (candidates[i].score, candidates[i].generation, i), reverse=True)

    def weights(self, candidates: Sequence[Elite]) -> np.ndarray:
        w = np.zeros(len(candidates))
        if len(candidates):
            w[self.order(candidates)[0]] = 1.0
        return w

    def select(self, candidates: Sequence[Elite], rng: np.random.Generator, n: int = 1) -> list[Elite]:
        _check(candidates, n)
        order = self.order(candidates)
        return [candidates[order[k % len(order)]] for k in range(n)]
