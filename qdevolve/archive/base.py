"""Shared machinery of every archive: the add/sample/inspirations/stats contract.

The contract the engine relies on (every built-in archive follows it):

* ``add(program, result) -> list[ArchiveEvent]`` is **deterministic given the sequence of
  previous adds**: there is no random draw inside ``add``. The engine rebuilds an archive
  on resume by replaying ``add`` over every evaluated program in the order the live
  archive saw them (evaluation order: with several workers, evaluations finish out of
  program order), which reproduces the same elites, feature ranges, islands and migrations. A program whose
  status is not ``ok`` (or whose score is missing or not finite) is not admitted and
  returns ``[]``, but it still counts as a child of each of its parents
  (:attr:`Elite.children`, used by DGM selection). Adding a program id that is already an
  elite returns ``[]``.
* ``sample(rng, selection, *, island=None, n=1)`` hands the candidates (the elites of
  ``island``, or all) to ``selection.select(candidates, rng, n)``.
* ``inspirations(parent_id, rng, *, n_best, n_diverse, island=None)``: the ``n_best``
  highest-scoring elites plus ``n_diverse`` random elites of other cells, never the parent.
* ``elites(island=None)``, ``get(program_id)``, ``stats()`` and ``n_islands``.

Archives hold :class:`~qdevolve.types.Elite` records (id, score, features, cell, island,
code hash, generation, children), never code. They import only ``qdevolve.types``,
``qdevolve.registry``, ``qdevolve.errors``, numpy and the pure inspiration helper.

QD-score (Pugh et al. 2016, "Quality Diversity: A New Frontier for Evolutionary
Computation") is reported as ``sum over elites of (score - qd_offset)``, where ``qd_offset``
is the archive setting (default 0), like pyribs' ``qd_score_offset``.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from qdevolve.archive.features import FeatureExtractor
from qdevolve.errors import ConfigError, QdevolveError
from qdevolve.selection.inspirations import sample_inspirations
from qdevolve.types import ArchiveEvent, Elite, EvalResult, Program

__all__ = [
    "ArchiveBase",
    "EmptyArchiveError",
    "FeatureRanges",
    "PointCache",
    "DEFAULT_FEATURES",
    "admissible_score",
    "projected_coverage",
]

DEFAULT_FEATURES: tuple[str, ...] = ("code_length", "diversity")


class EmptyArchiveError(QdevolveError):
    """``sample`` was called on an archive (or island) with no elites."""


def admissible_score(result: EvalResult | None) -> float | None:
    """The score an archive may admit: ``None`` unless ``ok`` with a finite score."""
    if result is None or result.status != "ok" or result.score is None:
        return None
    try:
        score = float(result.score)
    except (TypeError, ValueError):
        return None
    return score if math.isfinite(score) else None


_SCALE = 2.0**-64  # exact (a power of two): brings any finite score far below overflow


def qd_score(scores: Sequence[float], offset: float = 0.0) -> float:
    """QD-score ``sum_i (score_i - offset)`` over elites (Pugh et al. 2016), always finite.

    Scores are finite (:func:`admissible_score`), but their sum can overflow (two elites at
    1e308). The sum is then taken on the scores scaled by 2^-64 (exact) and scaled back,
    saturating at the largest finite float (``sys.float_info.max``, about 1.8e308) with the
    true sum's sign: a QD-score at that value means "at least this much".
    """
    if not len(scores):
        return 0.0
    x = np.asarray(scores, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        total = float(np.sum(x - offset))
        if math.isfinite(total):
            return total
        back = np.sum(x * _SCALE - offset * _SCALE) / _SCALE  # +/-inf when the true sum overflows
    return float(np.clip(back, -sys.float_info.max, sys.float_info.max))


class FeatureRanges:
    """Per-dimension ranges, each fixed or the running min/max of the values seen.

    Args:
        dimensions: Feature names.
        ranges: ``None`` (all running), a mapping name -> ``(lo, hi)`` or a sequence with
            one ``(lo, hi)`` or ``None`` per dimension; dimensions without a range run.

    Raises:
        ConfigError: a range is malformed or ``lo >= hi``.
    """

    def __init__(self, dimensions: Sequence[str], ranges: Any = None) -> None:
        self.dimensions = tuple(dimensions)
        d = len(self.dimensions)
        if ranges is None:
            spec: list[Any] = [None] * d
        elif isinstance(ranges, Mapping):
            unknown = sorted(set(ranges) - set(self.dimensions))
            if unknown:
                raise ConfigError(f"archive ranges name unknown feature(s) {unknown}; features are {list(self.dimensions)}")
            spec = [ranges.get(n) for n in self.dimensions]
        else:
            spec = list(ranges)
            if len(spec) != d:
                raise ConfigError(f"archive ranges has {len(spec)} entries for {d} feature dimensions")
        self.fixed = np.zeros(d, dtype=bool)
        self.lo = np.full(d, np.inf)
        self.hi = np.full(d, -np.inf)
        for i, r in enumerate(spec):
            if r is None:
                continue
            if len(r) != 2 or not float(r[0]) < float(r[1]):
                raise ConfigError(f"archive range for '{self.dimensions[i]}' must be [lo, hi] with lo < hi, got {r!r}")
            self.fixed[i] = True
            self.lo[i], self.hi[i] = float(r[0]), float(r[1])

    @property
    def all_fixed(self) -> bool:
        return bool(self.fixed.all())

    def vector(self, features: Mapping[str, float]) -> np.ndarray:
        return np.array([float(features[n]) for n in self.dimensions], dtype=np.float64)

    def update(self, features: Mapping[str, float]) -> bool:
        """Widen the running ranges to include ``features``; True when a range changed."""
        v = self.vector(features)
        lo = np.where(self.fixed, self.lo, np.minimum(self.lo, v))
        hi = np.where(self.fixed, self.hi, np.maximum(self.hi, v))
        changed = bool((lo != self.lo).any() or (hi != self.hi).any())
        self.lo, self.hi = lo, hi
        return changed

    def normalize(self, features: Mapping[str, float]) -> np.ndarray:
        """Features scaled to [0, 1] (clipped); 0.5 on a dimension whose range is a point."""
        return self.normalize_matrix(self.vector(features))

    def normalize_matrix(self, raw: np.ndarray) -> np.ndarray:
        """Rows (or one vector) of raw feature values scaled like :meth:`normalize`."""
        width = self.hi - self.lo
        ok = np.isfinite(width) & (width > 0)
        out = np.where(ok, (raw - self.lo) / np.where(ok, width, 1.0), 0.5)
        return np.clip(out, 0.0, 1.0)

    def state(self) -> dict[str, list[float | None]]:
        def f(x: float) -> float | None:
            return float(x) if math.isfinite(x) else None

        return {n: [f(self.lo[i]), f(self.hi[i])] for i, n in enumerate(self.dimensions)}


class PointCache:
    """Raw feature vectors of the elites, kept in the archive's insertion order."""

    def __init__(self, dim: int) -> None:
        self.ids: list[str] = []
        self._data = np.zeros((16, dim))

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def raw(self) -> np.ndarray:
        return self._data[: len(self.ids)]

    def append(self, program_id: str, vector: np.ndarray) -> None:
        n = len(self.ids)
        if n == len(self._data):
            self._data = np.concatenate([self._data, np.zeros_like(self._data)])
        self._data[n] = vector
        self.ids.append(program_id)

    def delete(self, index: int) -> None:
        n = len(self.ids)
        self._data[index : n - 1] = self._data[index + 1 : n]
        del self.ids[index]


def projected_coverage(points: np.ndarray, bins: int) -> tuple[int, int]:
    """(filled, total) cells of a ``bins``-per-dimension grid over points in [0, 1]^d."""
    if points.size == 0:
        return 0, bins ** (points.shape[1] if points.ndim == 2 else 1)
    idx = np.clip((points * bins).astype(np.int64), 0, bins - 1)
    return len({tuple(r) for r in idx.tolist()}), bins ** points.shape[1]


def _f(x: Any) -> float | None:
    return None if x is None else float(x)


def _elite_row(e: Elite) -> list[Any]:
    return [e.program_id, float(e.score), {k: float(v) for k, v in e.features.items()}, e.cell,
            int(e.island), e.code_hash, int(e.generation), int(e.children), _f(e.novelty)]


def _elite_from_row(row: list[Any]) -> Elite:
    pid, score, feats, cell, island, code_hash, gen, kids, nov = row
    return Elite(program_id=pid, score=score, features=feats, cell=cell, island=island, code_hash=code_hash,
                 generation=gen, children=kids, novelty=nov)


def points_state(p: PointCache) -> list[Any]:
    """A :class:`PointCache` as JSON (ids and raw vectors)."""
    return [list(p.ids), p.raw.tolist()]


def load_points(p: PointCache, data: list[Any]) -> None:
    """Fill an empty :class:`PointCache` from :func:`points_state` output."""
    ids, raw = data
    for pid, row in zip(ids, raw, strict=True):
        p.append(pid, np.asarray(row, dtype=np.float64))


class ArchiveBase:
    """Common state and methods; subclasses implement :meth:`insert_elite`.

    Args:
        feature_dimensions: Feature names (see :mod:`qdevolve.archive.features`).
        qd_offset: Subtracted from every elite's score in the QD-score.
        reference_size: Size of the diversity reference set.
    """

    name = "base"
    n_islands = 1

    def __init__(self, *, feature_dimensions: Sequence[str] = DEFAULT_FEATURES,
                 qd_offset: float = 0.0, reference_size: int = 16) -> None:
        if isinstance(feature_dimensions, str):
            feature_dimensions = [feature_dimensions]
        self.extractor = FeatureExtractor(feature_dimensions, reference_size=reference_size)
        self.feature_dimensions = self.extractor.dimensions
        self.qd_offset = float(qd_offset)
        self.island = 0
        self._elites: dict[str, Elite] = {}
        self._children: dict[str, int] = {}
        self.n_added = 0  # add() calls
        self.n_ok = 0  # of which admissible (status ok, finite score)

    # -- writing ------------------------------------------------------------------------
    def count_children(self, parent_ids: Sequence[str]) -> None:
        """Count one more evaluated child for each parent id."""
        for pid in parent_ids:
            self._children[pid] = self._children.get(pid, 0) + 1
            elite = self._elites.get(pid)
            if elite is not None:
                elite.children = self._children[pid]

    def add(self, program: Program, result: EvalResult) -> list[ArchiveEvent]:
        """Offer an evaluated program; returns what happened (deterministic, no RNG).

        Features are computed first: a program that cannot be placed raises before any
        state changes, so the engine's retry as ``invalid`` counts it once, like a replay."""
        score = admissible_score(result)
        admit = score is not None and program.id not in self._elites
        features = self.extractor(program, result) if admit else {}
        self.n_added += 1
        self.count_children(program.parent_ids)
        if not admit or score is None:
            return []
        self.n_ok += 1
        self.extractor.observe(program)
        elite = Elite(program_id=program.id, score=score, features=features, island=self.island,
                      code_hash=program.code_hash, generation=program.generation)
        return self.insert_elite(elite)

    def insert_elite(self, elite: Elite) -> list[ArchiveEvent]:
        """Place an elite whose features are already known (used by ``add`` and migration)."""
        raise NotImplementedError

    def _store(self, elite: Elite) -> None:
        elite.island = self.island
        elite.children = self._children.get(elite.program_id, 0)
        self._elites[elite.program_id] = elite

    def _event(self, kind: str, elite: Elite, *, replaced_id: str | None = None,
               data: dict[str, Any] | None = None) -> ArchiveEvent:
        return ArchiveEvent(program_id=elite.program_id, kind=kind, archive=self.name, island=self.island,
                            cell=elite.cell, replaced_id=replaced_id, score=elite.score, data=data or {})

    # -- reading ------------------------------------------------------------------------
    def elites(self, island: int | None = None) -> list[Elite]:
        """Current elites in insertion order (``island`` is ignored with one island)."""
        return list(self._elites.values())

    def get(self, program_id: str) -> Elite | None:
        return self._elites.get(program_id)

    def __len__(self) -> int:
        return len(self._elites)

    def __contains__(self, program_id: object) -> bool:
        return program_id in self._elites

    def children_of(self, program_id: str) -> int:
        return self._children.get(program_id, 0)

    def sample(self, rng: np.random.Generator, selection: Any, *, island: int | None = None,
               n: int = 1) -> list[Elite]:
        """``selection.select(candidates, rng, n)`` over the elites of ``island`` (or all).

        Raises:
            EmptyArchiveError: there is no candidate.
        """
        candidates = self.elites(island)
        if not candidates:
            where = f"island {island} of the {self.name} archive" if island is not None and self.n_islands > 1 else f"the {self.name} archive"
            raise EmptyArchiveError(
                f"{where} holds no elite to select a parent from: no program has been admitted yet "
                "(did every evaluation fail? see 'qdevolve archive stats')"
            )
        return list(selection.select(candidates, rng, n))

    def inspirations(self, parent_id: str, rng: np.random.Generator, *, n_best: int, n_diverse: int,
                     island: int | None = None) -> list[Elite]:
        """The ``n_best`` best elites plus ``n_diverse`` random elites of other cells."""
        return sample_inspirations(self.elites(island), parent_id, rng, n_best=n_best, n_diverse=n_diverse)

    def coverage(self) -> float:
        raise NotImplementedError

    # -- state: everything ``add`` reads, as JSON (archive snapshots, qdevolve.archive.snapshot) --
    #: True on a class whose :meth:`state` holds all of its state. Declared by each class for
    #: itself (a subclass with more state does not inherit it): archives without it are
    #: always rebuilt by replaying ``add``.
    owns_state = False

    def state(self) -> dict[str, Any]:
        """The archive's complete state as a JSON-ready dict: restoring it with
        :meth:`load_state` into a new archive of the same spec and going on with ``add`` gives
        exactly the archive that replaying every ``add`` gives."""
        st: dict[str, Any] = {
            "kind": self.name, "island": self.island, "n_added": self.n_added, "n_ok": self.n_ok,
            "elites": [_elite_row(e) for e in self._elites.values()],
            "reference": self.extractor.reference_state(),
            "children": [list(self._children), list(self._children.values())],
        }
        if isinstance(getattr(self, "ranges", None), FeatureRanges):
            st["ranges"] = [[float(x) for x in self.ranges.lo], [float(x) for x in self.ranges.hi]]
        st.update(self._own_state())
        return st

    def load_state(self, state: dict[str, Any]) -> None:
        """Load :meth:`state` output into this (new, empty) archive.

        Raises:
            ValueError: the state is of another kind of archive.
        """
        if state["kind"] != self.name:
            raise ValueError(f"state of a {state['kind']} archive, this archive is {self.name}")
        self.island, self.n_added, self.n_ok = int(state["island"]), int(state["n_added"]), int(state["n_ok"])
        keys, counts = state["children"]
        self._children = dict(zip(keys, (int(c) for c in counts), strict=True))
        self.extractor.load_reference_state(state["reference"])
        self._elites = {row[0]: _elite_from_row(row) for row in state["elites"]}
        if "ranges" in state:
            lo, hi = state["ranges"]
            self.ranges.lo, self.ranges.hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
        self._load_own_state(state)

    def _own_state(self) -> dict[str, Any]:
        """State a subclass keeps beyond the base's (cells, k-NN bookkeeping...)."""
        return {}

    def _load_own_state(self, state: dict[str, Any]) -> None:
        """Load what :meth:`_own_state` wrote."""

    def n_cells(self) -> int | None:
        return None

    def stats(self) -> dict[str, Any]:
        """``size``, ``coverage``, ``qd_score``, ``best_score``, ``best_program_id`` and more."""
        elites = self.elites()
        best = max(elites, key=lambda e: e.score, default=None)  # first of equal scores
        scores = [e.score for e in elites]
        return {
            "archive": self.name,
            "size": len(elites),
            "cells": self.n_cells(),
            "coverage": float(self.coverage()),
            "qd_score": qd_score(scores, self.qd_offset),
            "qd_offset": self.qd_offset,
            "best_score": None if best is None else float(best.score),
            "best_program_id": None if best is None else best.program_id,
            "mean_score": float(np.mean(scores)) if scores else None,
            "offered": self.n_added,
            "admissible": self.n_ok,
            "feature_dimensions": list(self.feature_dimensions),
        }
