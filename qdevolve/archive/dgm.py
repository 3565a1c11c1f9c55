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

**Clade statistics** (for ``hgm`` selection, the Huxley-Gödel Machine's clade-
metaproductivity, Wang et al. 2025, arXiv 2510.21614). A program's clade is itself and
every descendant the archive has seen. Each offered program yields ``(successes, trials)``
from its own evaluation:

* status ``ok`` with a per-test vector (``EvalResult.tests``): ``sum(tests)`` successes
  (each entry clipped to [0, 1], a non-finite entry counting 0) out of ``len(tests)``;
* status ``ok`` without a vector: one trial, a success when its score is strictly above
  its best parent's score (parents the archive saw; the seed, with no scored parent,
  adds no trial);
* any other status (error, timeout, invalid...): one trial, no success.

These are added to the program's own clade and to the clade of every ancestor (each once,
over every parent edge), so one ``add`` costs one walk up the ancestor chain. A program
that is not admitted (failed, or rejected by ``keep="better"``) and an evicted one still
count for their ancestors. The statistics are part of :meth:`DGMArchive.state`, so a
resumed archive and a replayed one hold the same numbers; elites carry them as
``Elite.clade_successes`` / ``Elite.clade_trials`` (and ``Elite.parent_id``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from qdevolve import registry
from qdevolve.archive.base import (
    DEFAULT_FEATURES,
    ArchiveBase,
    FeatureRanges,
    PointCache,
    admissible_score,
    load_points,
    points_state,
    projected_coverage,
)
from qdevolve.errors import ConfigError
from qdevolve.types import ArchiveEvent, Elite, EvalResult, Program

__all__ = ["DGMArchive", "CladeStats", "evaluation_outcome"]


def evaluation_outcome(result: EvalResult, parent_score: float | None) -> tuple[float, int]:
    """``(successes, trials)`` one evaluation adds to its clades (rule in the module docstring)."""
    score = admissible_score(result)
    if score is None:
        return 0.0, 1
    if result.tests:
        vals = [float(x) for x in result.tests]
        return float(sum(min(max(v, 0.0), 1.0) for v in vals if math.isfinite(v))), len(vals)
    if parent_score is None:
        return 0.0, 0
    return (1.0 if score > parent_score else 0.0), 1


class CladeStats:
    """Clade successes and trials of every program offered to an archive, by id.

    ``record`` adds one evaluation's outcome to the program and to each of its ancestors
    (once each, over every parent edge the archive saw); it never walks descendants.
    """

    def __init__(self) -> None:
        self.parents: dict[str, tuple[str, ...]] = {}
        self.successes: dict[str, float] = {}
        self.trials: dict[str, int] = {}
        self.scores: dict[str, float] = {}

    def __contains__(self, program_id: object) -> bool:
        return program_id in self.parents

    def declare(self, program_id: str, parent_ids: Sequence[str], successes: float = 0.0, trials: int = 0) -> None:
        """Know ``program_id`` (with its parents) without an evaluation (a migrant)."""
        if program_id not in self.parents:
            self.parents[program_id] = tuple(parent_ids)
            self.successes[program_id], self.trials[program_id] = float(successes), int(trials)

    def record(self, program: Program, result: EvalResult) -> list[str]:
        """Add ``program``'s evaluation; returns the ids whose statistics changed."""
        known = [self.scores[p] for p in program.parent_ids if p in self.scores]
        s, t = evaluation_outcome(result, max(known) if known else None)
        self.parents[program.id] = tuple(program.parent_ids)  # insert_elite may have declared it without
        self.successes.setdefault(program.id, 0.0)
        self.trials.setdefault(program.id, 0)
        score = admissible_score(result)
        if score is not None:
            self.scores[program.id] = score
        touched, stack, seen = [], [program.id], {program.id}
        while stack:
            pid = stack.pop()
            touched.append(pid)
            self.successes[pid] += s
            self.trials[pid] += t
            for parent in self.parents[pid]:
                if parent in self.parents and parent not in seen:
                    seen.add(parent)
                    stack.append(parent)
        return touched

    def apply(self, elite: Elite) -> None:
        """Copy the statistics of ``elite``'s program onto it."""
        pid = elite.program_id
        if pid in self.parents:
            parents = self.parents[pid]
            elite.parent_id = parents[0] if parents else None
            elite.clade_successes, elite.clade_trials = self.successes[pid], self.trials[pid]

    def state(self) -> list[Any]:
        ids = list(self.parents)
        return [ids, [list(self.parents[i]) for i in ids], [self.successes[i] for i in ids],
                [self.trials[i] for i in ids], [list(self.scores), list(self.scores.values())]]

    def load_state(self, data: list[Any]) -> None:
        ids, parents, succ, trials, (sids, svals) = data
        for i, par, s, t in zip(ids, parents, succ, trials, strict=True):
            self.declare(i, par, s, t)
        self.scores = {i: float(v) for i, v in zip(sids, svals, strict=True)}


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
        self.clades = CladeStats()

    def add(self, program: Program, result: EvalResult) -> list[ArchiveEvent]:
        """As :meth:`ArchiveBase.add`, then the evaluation's outcome is added to the clade
        statistics of the program and its ancestors (once per program id)."""
        fresh = program.id not in self.clades
        events = super().add(program, result)  # raises, if it does, before any state changes
        if fresh:
            for pid in self.clades.record(program, result):
                elite = self._elites.get(pid)
                if elite is not None:
                    self.clades.apply(elite)
        return events

    def insert_elite(self, elite: Elite) -> list[ArchiveEvent]:
        if self._first_score is None:
            self._first_score = elite.score
        elif self.keep == "better" and elite.score < self._first_score - self.noise:
            return []
        self.ranges.update(elite.features)
        elite.cell = str(self._counter)
        self._counter += 1
        self._store(elite)
        # a migrant from another island arrives with its home clade's statistics
        self.clades.declare(elite.program_id, () if elite.parent_id is None else (elite.parent_id,),
                            elite.clade_successes or 0.0, elite.clade_trials or 0)
        self.clades.apply(elite)
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
        return {"counter": self._counter, "first_score": self._first_score, "points": points_state(self._points),
                "clades": self.clades.state()}

    def _load_own_state(self, state: dict[str, Any]) -> None:
        if "clades" not in state:
            raise ValueError("dgm archive state without clade statistics (written by an older qdevolve): "
                             "rebuild the archive by replaying the run")
        self._counter, self._first_score = int(state["counter"]), state["first_score"]
        load_points(self._points, state["points"])
        self.clades.load_state(state["clades"])
        for elite in self._elites.values():
            self.clades.apply(elite)

    def stats(self) -> dict[str, Any]:
        out = super().stats()
        out["coverage_kind"] = f"projected {self.coverage_bins}^{len(self.feature_dimensions)} grid"
        out["ranges"] = self.ranges.state()
        return out
