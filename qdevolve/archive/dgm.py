"""The Darwin Gödel Machine's open-ended archive: keep every valid program.

The Darwin Gödel Machine (Zhang et al. 2025, arXiv 2505.22954) grows an archive of every
agent that compiled and produced a change (``keep_all``, its default), so stepping stones
that score poorly now stay available as parents later; its ``keep_better`` variant admits
a child only when its score is at least the seed's score minus an evaluation-noise margin.
Selection pressure then comes from the parent-selection rule (``dgm`` selection: sigmoid
score times ``1 / (1 + children)``), not from the archive.

There are no cells, so ``coverage`` is measured by projecting the kept programs onto a
``coverage_bins``-per-dimension grid over the running feature ranges: the fraction of
that grid's cells holding at least one program. ``qd_score`` is the sum of
``score - qd_offset`` over every kept program (it grows with the archive).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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

__all__ = ["DGMArchive"]


@registry.archive("dgm")
class DGMArchive(ArchiveBase):
    """Keeps every admissible program (``keep="all"``) or those near the seed (``"better"``).

    Args:
        keep: ``"all"`` or ``"better"`` (admit when ``score >= first_score - noise``, where
            ``first_score`` is the first admitted program's score, normally the seed's).
        noise: The evaluation-noise margin of ``keep="better"`` (DGM uses 0.1).
        max_size: Optional cap; beyond it the lowest-scoring program (the oldest among
            equals) is evicted with a ``removed`` event. ``None`` keeps everything.
        feature_dimensions: Features recorded on each elite (for coverage and selection).
        coverage_bins: Bins per dimension of the projected coverage grid.
        qd_offset: Subtracted from each score in the QD-score.
        reference_size: Diversity reference-set size.

    Raises:
        ConfigError: an option is invalid.
    """

    name = "dgm"

    def __init__(self, *, keep: str = "all", noise: float = 0.1, max_size: int | None = None,
                 feature_dimensions: Sequence[str] = DEFAULT_FEATURES, coverage_bins: int = 10,
                 qd_offset: float = 0.0, reference_size: int = 16) -> None:
        super().__init__(feature_dimensions=feature_dimensions, qd_offset=qd_offset,
                         reference_size=reference_size)
        if keep not in ("all", "better"):
            raise ConfigError(f"dgm archive keep must be 'all' or 'better', got {keep!r}")
        if max_size is not None and int(max_size) < 1:
            raise ConfigError(f"dgm archive max_size must be >= 1, got {max_size}")
        if int(coverage_bins) < 1:
            raise ConfigError(f"dgm archive coverage_bins must be >= 1, got {coverage_bins}")
        self.keep = keep
        self.noise = float(noise)
        self.max_size = None if max_size is None else int(max_size)
        self.coverage_bins = int(coverage_bins)
        self.ranges = FeatureRanges(self.feature_dimensions)
        self._first_score: float | None = None
        self._counter = 0
        self._points = PointCache(len(self.feature_dimensions))

    def insert_elite(self, elite: Elite) -> list[ArchiveEvent]:
        if self._first_score is None:
            self._first_score = elite.score
        elif self.keep == "better" and elite.score < self._first_score - self.noise:
            return []
        self.ranges.update(elite.features)
        elite.cell = str(self._counter)
        self._counter += 1
        self._store(elite)
        self._points.append(elite.program_id, self.ranges.vector(elite.features))
        events = [self._event("added", elite)]
        if self.max_size is not None and len(self._elites) > self.max_size:
            worst = min(self._elites.values(), key=lambda e: e.score)
            del self._elites[worst.program_id]
            self._points.delete(self._points.ids.index(worst.program_id))
            events.append(self._event("removed", worst, data={"reason": "max_size"}))
        return events

    def coverage(self) -> float:
        filled, total = self._projected()
        return filled / total

    def _projected(self) -> tuple[int, int]:
        return projected_coverage(self.ranges.normalize_matrix(self._points.raw), self.coverage_bins)

    def n_cells(self) -> int:
        return self.coverage_bins ** len(self.feature_dimensions)

    owns_state = True

    def _own_state(self) -> dict[str, Any]:
        return {"counter": self._counter, "first_score": self._first_score, "points": points_state(self._points)}

    def _load_own_state(self, state: dict[str, Any]) -> None:
        self._counter, self._first_score = int(state["counter"]), state["first_score"]
        load_points(self._points, state["points"])

    def stats(self) -> dict[str, Any]:
        out = super().stats()
        out["coverage_kind"] = f"projected {self.coverage_bins}^{len(self.feature_dimensions)} grid"
        out["ranges"] = self.ranges.state()
        return out
