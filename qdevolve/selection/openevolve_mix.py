"""OpenEvolve's parent sampling as one selection rule: exploration, exploitation, random.

OpenEvolve (``openevolve/database.py``, ``_sample_parent``) draws ``u ~ U(0, 1)`` per parent:
``u < exploration_ratio`` samples the current island, ``u < exploration_ratio +
exploitation_ratio`` samples its elite archive (the ``archive_size`` best programs), and
otherwise samples any program at random. Over an island's candidates ``N`` this is the
mixture

    p_i = (1 - exploitation_ratio) / N + exploitation_ratio * [rank_i <= K] / K,

with ``K = min(archive_size, N)`` and ``rank`` by score (best first, ties by insertion
order). The exploration and random branches are both uniform over the candidates the
archive hands us (the island's elites), so only their sum matters here.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from qdevolve import registry
from qdevolve.errors import ConfigError
from qdevolve.selection.rules import SelectionRule
from qdevolve.types import Elite

__all__ = ["OpenEvolveSelection"]


@registry.selection("openevolve")
class OpenEvolveSelection(SelectionRule):
    """OpenEvolve's exploration / exploitation / random parent mixture.

    Args:
        exploration_ratio: Probability of a uniform draw over the island's elites.
        exploitation_ratio: Probability of a uniform draw over the ``archive_size`` best.
        archive_size: Size of the elite set that exploitation draws from.

    Raises:
        ConfigError: a ratio outside [0, 1], ratios summing above 1, or ``archive_size < 1``.
    """

    name = "openevolve"

    def __init__(self, exploration_ratio: float = 0.2, exploitation_ratio: float = 0.7,
                 archive_size: int = 100) -> None:
        ratios = {"exploration_ratio": float(exploration_ratio), "exploitation_ratio": float(exploitation_ratio)}
        for key, value in ratios.items():
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"openevolve selection {key} must be in [0, 1], got {value}")
        if sum(ratios.values()) > 1.0 + 1e-9:
            raise ConfigError(f"openevolve selection exploration_ratio + exploitation_ratio must be <= 1, "
                              f"got {sum(ratios.values())}")
        if int(archive_size) < 1:
            raise ConfigError(f"openevolve selection archive_size must be >= 1, got {archive_size}")
        self.exploration_ratio = ratios["exploration_ratio"]
        self.exploitation_ratio = ratios["exploitation_ratio"]
        self.archive_size = int(archive_size)

    def weights(self, candidates: Sequence[Elite]) -> np.ndarray:
        n = len(candidates)
        k = min(self.archive_size, n)
        order = sorted(range(n), key=lambda i: (-candidates[i].score, i))
        w = np.full(n, (1.0 - self.exploitation_ratio) / n)
        w[order[:k]] += self.exploitation_ratio / k
        return w
