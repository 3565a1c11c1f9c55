"""MAP-Elites archive on a grid or on CVT cells.

MAP-Elites (Mouret & Clune 2015, "Illuminating search spaces by mapping elites") keeps, in
each cell of a discretised feature space, the best program that landed there. CVT-MAP-Elites
(Vassiliades et al. 2018) replaces the grid by the Voronoi cells of ``cvt_cells`` centroids
computed by k-means over uniform samples of the (normalised) feature space.

Binning of a feature value ``v`` with range ``[lo, hi]`` into ``b`` bins follows pyribs'
``GridArchive``: ``index = clip(floor((b * (v - lo) + 1e-6) / (hi - lo)), 0, b - 1)``.
Ranges are fixed (``ranges``) or the running min/max of every admissible program's
features (OpenEvolve's approach). When a running range widens, every elite is re-binned
under the new range; where two elites now share a cell the better one stays (equal
scores: the earlier one) and the other is evicted with a ``removed`` event. Because
ranges only move inside ``add``, replaying the same adds reproduces the same ranges and
cells, so a resumed run bins exactly as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from qdevolve import registry
from qdevolve.archive.base import DEFAULT_FEATURES, ArchiveBase, FeatureRanges
from qdevolve.errors import ConfigError
from qdevolve.types import ArchiveEvent, Elite

__all__ = ["MapElitesArchive", "cvt_centroids"]

_EPS = 1e-6


def cvt_centroids(n_cells: int, dim: int, *, samples: int = 10_000, iterations: int = 25,
                  seed: int = 0) -> np.ndarray:
    """``n_cells`` centroids in [0, 1]^dim by Lloyd's k-means over uniform samples (seeded)."""
    rng = np.random.default_rng(seed)
    pts = rng.random((max(samples, n_cells), dim))
    cent = pts[:n_cells].copy()
    for _ in range(iterations):
        d2 = ((pts[:, None, :] - cent[None, :, :]) ** 2).sum(-1)
        assign = d2.argmin(1)
        for k in range(n_cells):
            members = pts[assign == k]
            if len(members):
                cent[k] = members.mean(0)
    return cent


@registry.archive("map_elites")
class MapElitesArchive(ArchiveBase):
    """One elite per cell of a feature grid (or of CVT cells).

    Args:
        feature_dimensions: Feature names (evaluator features or built-ins
            ``code_length``, ``ast_complexity``, ``diversity``, ``score``).
        bins: Bins per dimension: one int, a list (one per dimension) or a mapping by name.
        ranges: Fixed ``[lo, hi]`` per dimension (mapping or list); ``None`` entries (or
            ``None`` altogether) use the running min/max.
        cvt_cells: When set, use that many CVT cells instead of the grid.
        cvt_samples: Uniform samples for the CVT k-means.
        cvt_iterations: Lloyd iterations for the CVT k-means.
        cvt_seed: Seed of the CVT samples (the centroids are a pure function of it).
        qd_offset: Subtracted from each score in the QD-score.
        reference_size: Diversity reference-set size.

    Raises:
        ConfigError: an option is invalid (bad bins, ranges or cell count).
    """

    name = "map_elites"

    def __init__(self, *, feature_dimensions: Sequence[str] = DEFAULT_FEATURES, bins: Any = 10,
                 ranges: Any = None, cvt_cells: int | None = None, cvt_samples: int = 10_000,
                 cvt_iterations: int = 25, cvt_seed: int = 0, qd_offset: float = 0.0,
                 reference_size: int = 16) -> None:
        super().__init__(feature_dimensions=feature_dimensions, qd_offset=qd_offset,
                         reference_size=reference_size)
        dims = self.feature_dimensions
        if isinstance(bins, dict):
            missing = [d for d in dims if d not in bins]
            if missing:
                raise ConfigError(f"map_elites bins has no entry for {missing}")
            bins = [bins[d] for d in dims]
        elif isinstance(bins, int):
            bins = [bins] * len(dims)
        bins = [int(b) for b in bins]
        if len(bins) != len(dims) or any(b < 1 for b in bins):
            raise ConfigError(f"map_elites bins must be >= 1 per dimension ({len(dims)} dims), got {bins}")
        self.bins = np.array(bins, dtype=np.int64)
        self.ranges = FeatureRanges(dims, ranges)
        self.centroids: np.ndarray | None = None
        if cvt_cells is not None:
            if int(cvt_cells) < 1:
                raise ConfigError(f"map_elites cvt_cells must be >= 1, got {cvt_cells}")
            self.centroids = cvt_centroids(int(cvt_cells), len(dims), samples=cvt_samples,
                                           iterations=cvt_iterations, seed=cvt_seed)
        self._cells: dict[str, str] = {}  # cell -> program id

    # -- binning ------------------------------------------------------------------------
    def cell_of(self, features: dict[str, float]) -> str:
        """The cell key of a feature dict under the current ranges (``"3,7"`` or ``"c12"``)."""
        return self._cells_of(self.ranges.vector(features)[None, :])[0]

    def grid_index(self, features: dict[str, float]) -> tuple[int, ...]:
        """Grid coordinates of a feature dict (pyribs' binning formula)."""
        return tuple(int(i) for i in self._grid_indices(self.ranges.vector(features)[None, :])[0])

    def _grid_indices(self, v: np.ndarray) -> np.ndarray:
        lo, hi = self.ranges.lo, self.ranges.hi
        width = hi - lo
        ok = np.isfinite(width) & (width > 0)
        raw = (self.bins * (v - lo) + _EPS) / np.where(ok, width, 1.0)
        idx = np.where(ok, np.floor(raw), self.bins // 2)
        return np.clip(idx, 0, self.bins - 1).astype(np.int64)

    def _cells_of(self, v: np.ndarray) -> list[str]:
        """Cell keys of a (n, d) matrix of raw feature vectors."""
        if self.centroids is not None:
            x = self.ranges.normalize_matrix(v)
            d2 = ((x[:, None, :] - self.centroids[None, :, :]) ** 2).sum(-1)
            return [f"c{int(k)}" for k in d2.argmin(1)]
        return [",".join(map(str, row)) for row in self._grid_indices(v).tolist()]

    def n_cells(self) -> int:
        return len(self.centroids) if self.centroids is not None else int(np.prod(self.bins))

    def coverage(self) -> float:
        return len(self._cells) / self.n_cells()

    # -- insertion ----------------------------------------------------------------------
    def insert_elite(self, elite: Elite) -> list[ArchiveEvent]:
        events: list[ArchiveEvent] = []
        if self.ranges.update(elite.features):
            events += self._rebin()
        cell = self.cell_of(elite.features)
        elite.cell = cell
        current_id = self._cells.get(cell)
        if current_id is None:
            self._cells[cell] = elite.program_id
            self._store(elite)
            events.append(self._event("added", elite))
        elif elite.score > self._elites[current_id].score:
            del self._elites[current_id]
            self._cells[cell] = elite.program_id
            self._store(elite)
            events.append(self._event("improved", elite, replaced_id=current_id))
        return events

    def _rebin(self) -> list[ArchiveEvent]:
        """Recompute every elite's cell after a range change; evict collision losers."""
        winners: dict[str, Elite] = {}
        losers: list[Elite] = []
        elites = list(self._elites.values())
        if not elites:
            return []
        cells = self._cells_of(np.array([self.ranges.vector(e.features) for e in elites]))
        for e, cell in zip(elites, cells, strict=False):
            cur = winners.get(cell)
            if cur is None:
                winners[cell] = e
            elif e.score > cur.score:
                losers.append(cur)
                winners[cell] = e
            else:
                losers.append(e)
            e.cell = cell
        events = []
        for e in losers:
            del self._elites[e.program_id]
            events.append(self._event("removed", e, data={"reason": "rebinned"}))
        self._cells = {cell: e.program_id for cell, e in winners.items()}
        return events

    owns_state = True

    def _own_state(self) -> dict[str, Any]:
        return {"cells": [list(self._cells), list(self._cells.values())]}

    def _load_own_state(self, state: dict[str, Any]) -> None:
        self._cells = dict(zip(*state["cells"], strict=True))

    def stats(self) -> dict[str, Any]:
        out = super().stats()
        out["kind"] = "cvt" if self.centroids is not None else "grid"
        out["bins"] = self.bins.tolist() if self.centroids is None else None
        out["ranges"] = self.ranges.state()
        return out
