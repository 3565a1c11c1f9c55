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
from qdevolve.archive.base import (
    DEFAULT_FEATURES,
    ArchiveBase,
    FeatureRanges,
    PointCache,
    load_points,
    points_state,
    projected_coverage,
)
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
        # Incremental k-NN bookkeeping: raw features in elite order and, per elite, its k
        # smallest distances to the other elites (sorted, inf-padded) under the current ranges.
        self._points = PointCache(len(self.feature_dimensions))
        self._knn = np.zeros((0, self.k))
        self._knn_valid = True

    # -- k-NN bookkeeping ---------------------------------------------------------------
    def _pts(self) -> np.ndarray:
        return self.ranges.normalize_matrix(self._points.raw)

    def _k_smallest(self, d: np.ndarray) -> np.ndarray:
        row = np.full(self.k, np.inf)
        kk = min(self.k, d.size)
        if kk:
            row[:kk] = np.sort(np.partition(d, kk - 1)[:kk])
        return row

    def _rebuild_knn(self) -> None:
        pts = self._pts()
        n = len(pts)
        dist = np.sqrt(((pts[:, None, :] - pts[None, :, :]) ** 2).sum(-1))
        self._knn = np.array([self._k_smallest(np.delete(dist[i], i)) for i in range(n)]).reshape(n, self.k)
        self._knn_valid = True

    def _append(self, elite: Elite, d: np.ndarray) -> None:
        """Add a row; ``d`` holds its distances to the existing rows."""
        if self._knn_valid:
            if len(d):
                self._knn = np.sort(np.concatenate([self._knn, d[:, None]], axis=1), axis=1)[:, : self.k]
            self._knn = np.vstack([self._knn, self._k_smallest(d)[None, :]])
        self._points.append(elite.program_id, self.ranges.vector(elite.features))

    def _remove(self, index: int) -> None:
        """Drop a row; rows that had it among their k nearest are recomputed."""
        if self._knn_valid:
            pts = self._pts()
            dj = np.sqrt(((pts - pts[index]) ** 2).sum(1))
            affected = [i for i in np.nonzero(dj <= self._knn[:, -1])[0].tolist() if i != index]
            self._knn = np.delete(self._knn, index, axis=0)
            pts = np.delete(pts, index, axis=0)
            for i in affected:
                j = i - (i > index)
                d = np.sqrt(((pts - pts[j]) ** 2).sum(1))
                self._knn[j] = self._k_smallest(np.delete(d, j))
        self._points.delete(index)

    # -- insertion ----------------------------------------------------------------------
    def insert_elite(self, elite: Elite) -> list[ArchiveEvent]:
        if self.ranges.update(elite.features):
            self._knn_valid = False
        pts = self._pts()
        x = self.ranges.normalize(elite.features)
        d = np.sqrt(((pts - x) ** 2).sum(1))
        novelty = float(self._k_smallest(d).mean()) if len(d) else float("inf")
        events: list[ArchiveEvent] = []
        if novelty >= self.threshold:
            elite.novelty = novelty if np.isfinite(novelty) else None
            elite.cell = str(self._counter)
            self._counter += 1
            self._append(elite, d)
            self._store(elite)
            events.append(self._event("added", elite, data={"novelty": elite.novelty}))
        elif self.replace_nearest:
            j = int(d.argmin())
            nearest = self._elites[self._points.ids[j]]
            if elite.score <= nearest.score:
                return []
            self._remove(j)
            del self._elites[nearest.program_id]
            elite.cell = nearest.cell
            elite.novelty = novelty
            self._append(elite, np.delete(d, j))
            self._store(elite)
            events.append(self._event("improved", elite, replaced_id=nearest.program_id,
                                      data={"novelty": novelty}))
        else:
            return []
        self._dirty = True
        if self.max_size is not None and len(self._elites) > self.max_size:
            self._refresh()
            least = min(self._elites.values(), key=lambda e: e.novelty if e.novelty is not None else np.inf)
            self._remove(self._points.ids.index(least.program_id))
            del self._elites[least.program_id]
            events.append(self._event("removed", least, data={"reason": "max_size"}))
            self._dirty = True
        return events

    def _refresh(self) -> None:
        """Set every elite's novelty: the mean of its (up to k) nearest-neighbour distances."""
        if not self._knn_valid:
            self._rebuild_knn()
        for pid, row in zip(self._points.ids, self._knn, strict=True):
            finite = row[np.isfinite(row)]
            self._elites[pid].novelty = float(finite.mean()) if finite.size else None
        self._dirty = False

    def elites(self, island: int | None = None) -> list[Elite]:
        if self._dirty:
            self._refresh()
        return super().elites(island)

    def coverage(self) -> float:
        filled, total = projected_coverage(self._pts(), self.coverage_bins)
        return filled / total

    def n_cells(self) -> int:
        return self.coverage_bins ** len(self.feature_dimensions)

    owns_state = True

    def _own_state(self) -> dict[str, Any]:
        return {"counter": self._counter, "dirty": self._dirty, "points": points_state(self._points),
                "knn": self._knn.tolist(), "knn_valid": self._knn_valid}

    def _load_own_state(self, state: dict[str, Any]) -> None:
        self._counter, self._dirty, self._knn_valid = int(state["counter"]), bool(state["dirty"]), \
            bool(state["knn_valid"])
        load_points(self._points, state["points"])
        self._knn = np.asarray(state["knn"], dtype=np.float64).reshape(-1, self.k)

    def stats(self) -> dict[str, Any]:
        out = super().stats()
        novs = [e.novelty for e in self.elites() if e.novelty is not None]
        out["mean_novelty"] = float(np.mean(novs)) if novs else None
        out["coverage_kind"] = f"projected {self.coverage_bins}^{len(self.feature_dimensions)} grid"
        out["ranges"] = self.ranges.state()
        return out
