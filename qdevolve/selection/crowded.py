"""Crowded binary tournament: NSGA-II's parent selection over a ``pareto`` archive.

Deb et al. 2002 ("A fast and elitist multiobjective genetic algorithm: NSGA-II") pick each
parent by a binary tournament under the *crowded comparison*: of two candidates drawn
uniformly, the one of lower non-domination rank wins, and between equal ranks the one of
larger crowding distance (the less crowded part of the front); remaining ties go to the
earlier candidate. The ranks and distances are those the archive sets on its elites
(:attr:`Elite.rank`, :attr:`Elite.crowding`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from qdevolve import registry
from qdevolve.errors import ConfigError
from qdevolve.selection.rules import SelectionRule, _check
from qdevolve.types import Elite

__all__ = ["CrowdedTournamentSelection"]


def _key(e: Elite, i: int) -> tuple[int, float, int]:
    """Smaller wins: rank, then the larger crowding distance (``inf`` at a front's ends)."""
    return int(e.rank or 0), -(e.crowding if e.crowding is not None else 0.0), i


@registry.selection("crowded_tournament")
class CrowdedTournamentSelection(SelectionRule):
    """Binary tournaments on ``(rank, -crowding)`` (lower wins), ``k`` entrants each.

    Args:
        k: Entrants per tournament (2 in NSGA-II; 1 is uniform).

    Raises:
        ConfigError: a candidate carries no rank (the archive is not ``pareto``).
    """

    name = "crowded_tournament"

    def __init__(self, k: int = 2) -> None:
        if isinstance(k, bool) or int(k) < 1:
            raise ConfigError(f"crowded_tournament size k must be >= 1, got {k}")
        self.k = int(k)

    def select(self, candidates: Sequence[Elite], rng: np.random.Generator, n: int = 1) -> list[Elite]:
        _check(candidates, n)
        unranked = [c.program_id[:12] for c in candidates if c.rank is None]
        if unranked:
            raise ConfigError(f"selection crowded_tournament needs ranked elites (archive type 'pareto'); "
                              f"elite {unranked[0]} has no rank: use another selection or archive")
        chosen: list[int] = []
        for _ in range(n):
            pool = [i for i in range(len(candidates)) if i not in chosen] or list(range(len(candidates)))
            size = min(self.k, len(pool))
            entrants = [int(pool[j]) for j in rng.choice(len(pool), size=size, replace=False)]
            chosen.append(min(entrants, key=lambda i: _key(candidates[i], i)))
        return [candidates[i] for i in chosen]
