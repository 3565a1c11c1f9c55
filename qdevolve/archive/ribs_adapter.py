"""Adapter over pyribs' ``GridArchive`` (optional extra ``qd``: ``pip install qdevolve[qd]``).

pyribs (Tjanaka et al. 2023, "pyribs: A Bare-Bones Python Library for Quality Diversity
Optimization") does the binning and elitist replacement; this adapter stores only program
ids as pyribs solutions (``solution_dim=()``, ``solution_dtype=object``) and keeps the
:class:`~qdevolve.types.Elite` bookkeeping (code hash, generation, children) beside it.
In pyribs' words our features are *measures* and our score is the *objective*.

The archive is elitist (``learning_rate=1``, ``threshold_min=-inf``, pyribs' defaults):
CMA-MAE soft thresholds can evict a better program, which program evolution cannot afford.
pyribs needs fixed ``ranges``; with the same ranges and bins, the same inserts give the same
elites as :class:`~qdevolve.archive.map_elites.MapElitesArchive` (a test checks this).
pyribs is imported only when the archive is created.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from qdevolve import registry
from qdevolve.archive.base import DEFAULT_FEATURES, ArchiveBase
from qdevolve.errors import ConfigError
from qdevolve.types import ArchiveEvent, Elite

__all__ = ["RibsArchive"]


@registry.archive("ribs")
class RibsArchive(ArchiveBase):
    """A pyribs ``GridArchive`` holding program ids.

    Args:
        ranges: Fixed ``[lo, hi]`` per feature dimension (list, or mapping by name); required.
        feature_dimensions: Feature names.
        bins: Bins per dimension (int or list).
        qd_offset: pyribs' ``qd_score_offset``: subtracted from each score in the QD-score.
        reference_size: Diversity reference-set size.

    Raises:
        ConfigError: pyribs is not installed, or ranges/bins are invalid.
    """

    name = "ribs"

    def __init__(self, *, ranges: Any, feature_dimensions: Sequence[str] = DEFAULT_FEATURES,
                 bins: Any = 10, qd_offset: float = 0.0, reference_size: int = 16) -> None:
        super().__init__(feature_dimensions=feature_dimensions, qd_offset=qd_offset,
                         reference_size=reference_size)
        try:
            from ribs.archives import GridArchive
        except ImportError as exc:
            raise ConfigError(
                "the 'ribs' archive needs pyribs: pip install 'qdevolve[qd]' (or use archive type map_elites)"
            ) from exc
        dims = self.feature_dimensions
        if isinstance(ranges, Mapping):
            missing = [d for d in dims if d not in ranges]
            if missing:
                raise ConfigError(f"ribs archive needs a fixed range for every feature; missing {missing}")
            ranges = [ranges[d] for d in dims]
        ranges = [tuple(float(x) for x in r) for r in ranges]
        if len(ranges) != len(dims) or any(len(r) != 2 or not r[0] < r[1] for r in ranges):
            raise ConfigError(f"ribs archive ranges must be one [lo, hi] (lo < hi) per feature, got {ranges}")
        bins = [int(bins)] * len(dims) if isinstance(bins, int) else [int(b) for b in bins]
        if len(bins) != len(dims) or any(b < 1 for b in bins):
            raise ConfigError(f"ribs archive bins must be >= 1 per dimension, got {bins}")
        self.bins = bins
        self._ribs = GridArchive(solution_dim=(), solution_dtype=object, dims=bins, ranges=ranges,
                                 qd_score_offset=self.qd_offset)

    def _measures(self, elite: Elite) -> np.ndarray:
        return np.array([float(elite.features[d]) for d in self.feature_dimensions], dtype=np.float64)

    def insert_elite(self, elite: Elite) -> list[ArchiveEvent]:
        m = self._measures(elite)
        idx = int(self._ribs.index_of_single(m))
        elite.cell = ",".join(str(int(i)) for i in self._ribs.int_to_grid_index([idx])[0])
        occupied, data = self._ribs.retrieve_single(m)
        previous = str(data["solution"]) if occupied else None
        status = int(self._ribs.add_single(elite.program_id, elite.score, m)["status"])
        if status == 0:
            return []
        self._store(elite)
        if previous is None:
            return [self._event("added", elite)]
        self._elites.pop(previous, None)
        return [self._event("improved", elite, replaced_id=previous)]

    owns_state = True

    def _own_state(self) -> dict[str, Any]:
        return {"objective_sum": float(self._ribs._objective_sum)}  # pyribs' running sum: its rounding is history

    def _load_own_state(self, state: dict[str, Any]) -> None:
        elites = self._elites
        for e in elites.values():  # elitist grid: one elite per cell, so refilling reproduces it
            self._ribs.add_single(e.program_id, e.score, self._measures(e))
        if elites:  # the stored running sum, so the QD-score has the same rounding as a replay
            best = max(elites.values(), key=lambda e: e.score)
            total = np.asarray(state["objective_sum"], dtype=self._ribs.dtypes["objective"])
            self._ribs._stats_update(total, self._ribs.index_of_single(self._measures(best)))

    def n_cells(self) -> int:
        return int(np.prod(self.bins))

    def coverage(self) -> float:
        return float(self._ribs.stats.coverage)

    def stats(self) -> dict[str, Any]:
        out = super().stats()
        rs = self._ribs.stats
        out["ribs"] = {"num_elites": int(rs.num_elites), "coverage": float(rs.coverage),
                       "qd_score": float(rs.qd_score), "obj_max": None if rs.obj_max is None else float(rs.obj_max)}
        return out
