"""Novelty archive: admit programs whose features are far from those already kept.

Novelty search (Lehman & Stanley 2011, "Abandoning objectives: evolution through the
search for novelty alone") scores a behaviour ``x`` by its mean distance to its ``k``
nearest neighbours in the archive,

    novelty(x) = (1/k) * sum_{j=1..k} ||x - n_j(x)||_2,

and admits ``x`` when ``novelty(x) >= threshold`` (pyribs' ``ProximityArchive`` uses the
same rule). Distances are taken on features scaled to [0, 1] by fixed ranges or the
running min/max. With ``replace_nearest`` a program that is not novel but scores higher
than its nearest neighbour replaces it (``improved``), a local-competition step in the
spirit of NSLC (Lehman & Stanley 2011b) that keeps quality from eroding.

``Elite.novelty`` is recomputed against the current archive whenever elites are read
after a change. ``coverage`` is the fraction of a ``coverage_bins``-per-dimension grid,
over the normalised features, that holds at least one elite.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from qdevolve import registry
from qdevolve.archive.base import DEFAULT_FEATURES, ArchiveBase, FeatureRanges, projected_coverage
from qdevolve.errors import ConfigError
from qdevolve.types import ArchiveEvent, Elite

__all__ = ["NoveltyArchive", "knn_novelty"]


def knn_novelty(x: np.ndarray, others: np.ndarray, k: int) -> float:
    """Mean Euclidean distance from ``x`` to its ``k`` nearest rows of ``others``."""
    if len(others) == 0:
        return float("inf")
    d = np.sqrt(((others - x) ** 2).sum(1))
    k = min(k, len(d))
    return float(np.partition(d, k - 1)[:k].mean())


@registry.archive("novelty")
class NoveltyArchive(ArchiveBase):
    """k-nearest-neighbour novelty over features with an admission threshold.

    Args:
        feature_dimensions: Feature names.
        k: Neighbours in the novelty average.
        threshold: Minimum novelty (in normalised feature units) to be admitted.
        ranges: Fixed ``[lo, hi]`` per dimension; ``None`` uses running min/max.
        replace_nearest: A non-novel program that beats its nearest neighbour replaces it.
        max_size: Optional cap; beyond it the least novel elite is evicted (``removed``).
        coverage_bins: Bins per dimension of the coverage grid.
        qd_offset: Subtracted from each score in the QD-score.
        reference_size: Diversity reference-set size.

    Raises:
        ConfigError: an option is invalid.
    """

    name = "novelty"

    def __init__(self, *, feature_dimensions: Sequence[str] = DEFAULT_FEATURES, k: int = 15,
                 threshold: float = 0.05, ranges: Any = None, replace_nearest: bool = True,
                 max_size: int | None = None, coverage_bins: int = 10, qd_offset: float = 0.0,
                 reference_size: int = 16) -> None:
        super().__init__(feature_dimensions=feature_dimensions, qd_offset=qd_offset,
                         reference_size=reference_size)
        if int(k) < 1:
            raise ConfigError(f"novelty archive k must be >= 1, got {k}")
        if float(threshold) < 0:
            raise ConfigError(f"novelty archive threshold must be >= 0, got {threshold}")
        if max_size is not None and int(max_size) < 1:
            raise ConfigError(f"novelty archive max_size must be >= 1, got {max_size}")
        self.k = int(k)
        self.threshold = float(threshold)
        self.replace_nearest = bool(replace_nearest)
        self.max_size = None if max_size is None else int(max_size)
        self.coverage_bins = int(coverage_bins)
        self.ranges = FeatureRanges(self.feature_dimensions, ranges)
        self._counter = 0
        self._dirty = False

    def _matrix(self, elites: list[Elite]) -> np.ndarray:
        if not elites:
            return np.zeros((0, len(self.feature_dimensions)))
        return np.array([self.ranges.normalize(e.features) for e in elites])

    def insert_elite(self, elite: Elite) -> list[ArchiveEvent]:
        self.ranges.update(elite.features)
        current = list(self._elites.values())
        x = self.ranges.normalize(elite.features)
        pts = self._matrix(current)
        novelty = knn_novelty(x, pts, self.k)
        events: list[ArchiveEvent] = []
        if novelty >= self.threshold:
            elite.novelty = None if not np.isfinite(novelty) else novelty
            elite.cell = str(self._counter)
            self._counter += 1
            self._store(elite)
            events.append(self._event("added", elite, data={"novelty": elite.novelty}))
        elif self.replace_nearest:
            nearest = current[int(np.sqrt(((pts - x) ** 2).sum(1)).argmin())]
            if elite.score <= nearest.score:
                return []
            del self._elites[nearest.program_id]
            elite.cell = nearest.cell
            elite.novelty = novelty
            self._store(elite)
            events.append(self._event("improved", elite, replaced_id=nearest.program_id,
                                      data={"novelty": novelty}))
        else:
            return []
        self._dirty = True
        if self.max_size is not None and len(self._elites) > self.max_size:
            self._refresh()
            least = min(self._elites.values(), key=lambda e: e.novelty if e.novelty is not None else np.inf)
            del self._elites[least.program_id]
            events.append(self._event("removed", least, data={"reason": "max_size"}))
            self._dirty = True
        return events

    def _refresh(self) -> None:
        """Recompute every elite's novelty against the rest of the archive."""
        elites = list(self._elites.values())
        if len(elites) < 2:
            for e in elites:
                e.novelty = None
        else:
            pts = self._matrix(elites)
            dist = np.sqrt(((pts[:, None, :] - pts[None, :, :]) ** 2).sum(-1))
            np.fill_diagonal(dist, np.inf)
            k = min(self.k, len(elites) - 1)
            nov = np.partition(dist, k - 1, axis=1)[:, :k].mean(1)
            for e, v in zip(elites, nov.tolist(), strict=False):
                e.novelty = float(v)
        self._dirty = False

    def elites(self, island: int | None = None) -> list[Elite]:
        if self._dirty:
            self._refresh()
        return super().elites(island)

    def coverage(self) -> float:
        filled, total = projected_coverage(self._matrix(list(self._elites.values())), self.coverage_bins)
        return filled / total

    def n_cells(self) -> int:
        return self.coverage_bins ** len(self.feature_dimensions)

    def stats(self) -> dict[str, Any]:
        out = super().stats()
        novs = [e.novelty for e in self.elites() if e.novelty is not None]
        out["mean_novelty"] = float(np.mean(novs)) if novs else None
        out["coverage_kind"] = f"projected {self.coverage_bins}^{len(self.feature_dimensions)} grid"
        out["ranges"] = self.ranges.state()
        return out
