"""Pareto archive: the non-dominated front of several objectives, per niche.

An evaluator returns each objective as a metric of the same name; the run's config declares
which metrics are objectives and whether each is maximised or minimised
(``objectives: {accuracy: max, length: min}``, copied into this archive's spec). With
``order: nsga2`` (the default) each niche keeps its *non-dominated front*: a program enters
when no member dominates it (and none has the same objective vector) and evicts every member
it dominates; when the front outgrows ``capacity``, the member of smallest crowding distance
leaves (NSGA-II's truncation, Deb et al. 2002, "A fast and elitist multiobjective genetic
algorithm: NSGA-II"; formulas in :mod:`qdevolve.archive.pareto_math`; ties: the newest
leaves, so a newcomer that would be the one to go is not admitted). With
``order: lexicographic`` each niche keeps its ``capacity`` best programs in the order of
``priority`` (the first objective decides, the next breaks ties; OpenEvolve's RFC #453).

Niches are one (no ``feature_dimensions``) or the cells of a MAP-Elites grid over the given
features (``bins``, ``ranges``: :class:`~qdevolve.archive.map_elites.MapElitesArchive`'s
binning; when a running range widens every member is placed again and each niche filtered).

Across niches every member gets a global NSGA-II rank and crowding distance
(:attr:`Elite.rank`, :attr:`Elite.crowding`; under ``lexicographic`` the rank is the
lexicographic place), read by the ``crowded_tournament`` selection (Deb's binary tournament
on ``(rank, crowding)``). Rules that read one number read :attr:`Elite.score`, set by the
declared ``scalar``: ``score`` (the evaluator's ``combined_score``, the default), ``rank``
(``-rank``: the front scores 0), ``first`` (the first objective in priority order, negated
when minimised) or ``weighted`` (``sum_m w_m * s_m`` with ``s_m`` the objective negated when
minimised and ``w_m`` from ``weights``).

``add`` draws nothing at random, so replaying the stored evaluations rebuilds the same front;
``state()`` holds everything ``add`` reads (members, their objectives, niches, feature ranges),
so an archive snapshot plus the evaluations after it rebuilds it too.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from qdevolve import registry
from qdevolve.archive.base import ArchiveBase, admissible_score
from qdevolve.archive.pareto_math import (
    DIRECTIONS,
    crowding_distances,
    dominates,
    lexicographic_ranks,
    non_dominated_ranks,
    signed,
)
from qdevolve.errors import ConfigError, QdevolveError
from qdevolve.types import ArchiveEvent, Elite, EvalResult, Program

__all__ = ["ParetoArchive", "ObjectiveError", "parse_objectives", "read_objectives", "ORDERS", "SCALARS"]

ORDERS: tuple[str, ...] = ("nsga2", "lexicographic")
SCALARS: tuple[str, ...] = ("score", "rank", "first", "weighted")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]{0,63}")
_ONE_NICHE = "all"


class ObjectiveError(QdevolveError):
    """An evaluation lacks a declared objective, or holds one that is not a finite number."""


def parse_objectives(objectives: Any, *, where: str = "objectives") -> dict[str, str]:
    """``{name: "max" | "min"}`` checked: a non-empty mapping of metric names to directions.

    Raises:
        ConfigError: not a mapping, empty, a bad name or a direction other than max/min.
    """
    if not isinstance(objectives, Mapping) or not objectives:
        raise ConfigError(f"{where} must be a mapping of metric names to max or min, e.g. "
                          f"{{accuracy: max, length: min}}; got {objectives!r}")
    out: dict[str, str] = {}
    for name, direction in objectives.items():
        if not isinstance(name, str) or not _NAME.fullmatch(name) or name == "combined_score":
            raise ConfigError(f"{where}: objective name {name!r} must be a metric name (a letter or '_', then "
                              f"letters, digits, '_', '.', '/', '-'; at most 64; not combined_score)")
        if direction not in DIRECTIONS:
            raise ConfigError(f"{where}.{name}: direction must be 'max' or 'min', got {direction!r}")
        out[name] = direction
    return out


def read_objectives(program_id: str, result: EvalResult, names: Sequence[str]) -> dict[str, float]:
    """The declared objectives of one evaluation: ``result.objectives``, else its metrics.

    Raises:
        ObjectiveError: an objective is missing, or not a finite number (naming it).
    """
    out: dict[str, float] = {}
    for name in names:
        value = result.objectives.get(name, result.metrics.get(name))
        if value is None:
            have = sorted(set(result.metrics) | set(result.objectives))
            raise ObjectiveError(f"program {program_id[:12]}: objective '{name}' is not among the evaluator's "
                                 f"metrics {have[:20]}; return '{name}' from evaluate() or change 'objectives'")
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(float(value)):
            raise ObjectiveError(f"program {program_id[:12]}: objective '{name}' must be a finite number, "
                                 f"got {str(value)[:40]!r}")
        out[name] = float(value)
    return out


@registry.archive("pareto")
class ParetoArchive(ArchiveBase):
    """The non-dominated front (or lexicographic best) of each niche, of bounded size.

    Args:
        objectives: ``{metric name: "max" | "min"}`` (the run config's ``objectives``).
        order: ``nsga2`` (Pareto front, crowding truncation) or ``lexicographic``.
        priority: Objective names in lexicographic priority (the rest follow in declared
            order); also decides which objective ``scalar: first`` reads.
        capacity: Most members per niche (>= 1).
        scalar: What :attr:`Elite.score` holds: ``score``, ``rank``, ``first`` or ``weighted``.
        weights: ``{objective: weight}`` for ``scalar: weighted`` (unnamed objectives weigh 0).
        feature_dimensions: Features whose grid cells are the niches; none: one niche.
        bins: Grid bins per feature dimension (as ``map_elites``).
        ranges: Fixed feature ranges (as ``map_elites``); default running min/max.
        qd_offset: Subtracted from each score in the QD-score.
        reference_size: Diversity reference-set size (``diversity`` feature).

    Raises:
        ConfigError: an option is invalid (naming it).
    """

    name = "pareto"

    def __init__(self, *, objectives: Mapping[str, str] | None = None, order: str = "nsga2",
                 priority: Sequence[str] | None = None, capacity: int = 32, scalar: str = "score",
                 weights: Mapping[str, float] | None = None, feature_dimensions: Sequence[str] | None = None,
                 bins: Any = 4, ranges: Any = None, qd_offset: float = 0.0, reference_size: int = 16) -> None:
        if objectives is None:
            raise ConfigError("the pareto archive needs objectives: set 'objectives: {name: max|min, ...}' in "
                              "config.yaml (or 'archive.objectives')")
        self.objectives = parse_objectives(objectives, where="archive.objectives")
        if order not in ORDERS:
            raise ConfigError(f"archive.order must be one of {list(ORDERS)}, got {order!r}")
        if scalar not in SCALARS:
            raise ConfigError(f"archive.scalar must be one of {list(SCALARS)}, got {scalar!r}")
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ConfigError(f"archive.capacity must be an integer >= 1, got {capacity!r}")
        prio = list(priority or [])
        bad = [p for p in prio if p not in self.objectives]
        if bad or len(set(prio)) != len(prio):
            raise ConfigError(f"archive.priority must name distinct objectives of {list(self.objectives)}, "
                              f"got {prio}")
        self.priority = [*prio, *(n for n in self.objectives if n not in prio)]
        self.order, self.scalar, self.capacity = order, scalar, capacity
        self.weights = self._parse_weights(weights)
        self._directions = {n: self.objectives[n] for n in self.priority}
        self._binner = None
        dims: Sequence[str] = ("score",)  # one niche: no feature to compute from code
        if feature_dimensions:
            from qdevolve.archive.map_elites import MapElitesArchive

            self._binner = MapElitesArchive(feature_dimensions=feature_dimensions, bins=bins, ranges=ranges)
            dims = feature_dimensions
        super().__init__(feature_dimensions=dims, qd_offset=qd_offset, reference_size=reference_size)
        self._niches: dict[str, list[str]] = {}  # niche -> member ids, in insertion order
        self._vec: dict[str, tuple[float, ...]] = {}  # member id -> signed objective vector
        self._incoming: dict[str, float] = {}
        self._ranked = True  # Elite.rank / crowding / a rank score are current
        self._front: list[tuple[Elite, float]] | None = None  # front(), while ranked

    def _parse_weights(self, weights: Mapping[str, float] | None) -> dict[str, float]:
        if self.scalar != "weighted":
            if weights:
                raise ConfigError("archive.weights is read only with 'scalar: weighted'")
            return {}
        if not isinstance(weights, Mapping) or not weights:
            raise ConfigError("archive.scalar 'weighted' needs archive.weights: {objective: weight, ...}")
        out = {}
        for k, w in weights.items():
            if k not in self.objectives:
                raise ConfigError(f"archive.weights names '{k}', not an objective of {list(self.objectives)}")
            if isinstance(w, bool) or not isinstance(w, int | float) or not math.isfinite(float(w)):
                raise ConfigError(f"archive.weights.{k} must be a finite number, got {w!r}")
            out[k] = float(w)
        return out

    # -- insertion ----------------------------------------------------------------------
    def add(self, program: Program, result: EvalResult) -> list[ArchiveEvent]:
        """As :meth:`ArchiveBase.add`; the objectives are read first, so an evaluation without
        one raises :class:`ObjectiveError` before any state changes (the engine then stores
        the program as ``invalid`` with that message)."""
        self._incoming = {}
        if admissible_score(result) is not None and program.id not in self._elites:
            self._incoming = read_objectives(program.id, result, list(self.objectives))
        return super().add(program, result)

    def insert_elite(self, elite: Elite) -> list[ArchiveEvent]:
        if not elite.objectives:
            elite.objectives = dict(self._incoming)
        events: list[ArchiveEvent] = []
        if self._binner is not None and self._binner.ranges.update(elite.features):
            events += self._regroup()
        self._ranked = self._ranked and not events
        cell = self._niche_of(elite.features)
        elite.cell = cell
        vec = signed(elite.objectives, self._directions)
        members = self._niches.get(cell, [])
        if any(self._vec[m] == vec for m in members):
            return events
        if self.order == "nsga2":
            if any(dominates(self._vec[m], vec) for m in members):
                return events
            beaten = [m for m in members if dominates(vec, self._vec[m])]
            kept = [m for m in members if m not in beaten]
        else:
            beaten, kept = [], list(members)
        ids, vecs = [*kept, elite.program_id], [*(self._vec[m] for m in kept), vec]
        crowded = None
        if len(ids) > self.capacity:
            crowded = ids[self._worst(vecs)]
            if crowded == elite.program_id:
                return events
        kind = "added" if not members else ("improved" if beaten else "replaced" if crowded else "added")
        gone = [*beaten, *([crowded] if crowded else [])]
        for m in gone:
            events.append(self._event("removed", self._elites[m],
                                      data={"reason": "dominated" if m in beaten else
                                            "crowded" if self.order == "nsga2" else "outranked"}))
            self._drop(m)
        self._vec[elite.program_id] = vec
        self._niches.setdefault(cell, []).append(elite.program_id)
        if self.scalar == "first":
            elite.score = vec[0]
        elif self.scalar == "weighted":
            elite.score = sum(w * vec[self.priority.index(n)] for n, w in self.weights.items())
        self._store(elite)
        self._ranked = False
        if self.scalar == "rank":  # the event carries the score: rank now (else ranks wait for a read)
            self._rerank()
        events.append(self._event(kind, elite, replaced_id=gone[0] if gone else None,
                                  data={"objectives": dict(elite.objectives)}))
        return events

    def _worst(self, vecs: list[tuple[float, ...]]) -> int:
        """Index of the member a full niche lets go (ties: the latest)."""
        if self.order == "lexicographic":
            key = lexicographic_ranks(vecs)
            return max(range(len(vecs)), key=lambda i: (key[i], i))
        crowd = crowding_distances(vecs)
        return min(range(len(vecs)), key=lambda i: (crowd[i], -i))

    def _drop(self, program_id: str) -> None:
        cell = self._elites.pop(program_id).cell or _ONE_NICHE
        self._vec.pop(program_id)
        self._niches[cell].remove(program_id)
        if not self._niches[cell]:
            del self._niches[cell]

    def _niche_of(self, features: Mapping[str, float]) -> str:
        return _ONE_NICHE if self._binner is None else self._binner.cell_of(dict(features))

    def _regroup(self) -> list[ArchiveEvent]:
        """Place every member again after a running range widened; filter each niche."""
        order = list(self._elites)
        self._niches = {}
        for pid in order:
            e = self._elites[pid]
            e.cell = self._niche_of(e.features)
            self._niches.setdefault(e.cell, []).append(pid)
        events = []
        for members in list(self._niches.values()):
            for m in self._filtered_out(members):
                events.append(self._event("removed", self._elites[m], data={"reason": "regrouped"}))
                self._drop(m)
        return events

    def _filtered_out(self, members: list[str]) -> list[str]:
        """Members of a merged niche that leave: dominated ones (nsga2), then the worst while
        over capacity."""
        keep = list(members)
        if self.order == "nsga2":
            ranks = non_dominated_ranks([self._vec[m] for m in keep])
            keep = [m for m, r in zip(keep, ranks, strict=True) if r == 0]
            first: dict[tuple[float, ...], str] = {}  # equal vectors: the earliest stays
            for m in keep:
                first.setdefault(self._vec[m], m)
            keep = [m for m in keep if first[self._vec[m]] == m]
        while len(keep) > self.capacity:
            keep.pop(self._worst([self._vec[m] for m in keep]))
        return [m for m in members if m not in keep]

    def _rerank(self) -> None:
        """Global rank and crowding of every member (and ``-rank`` as the score under
        ``scalar: rank``); computed when read, not at every ``add``, so a replay stays cheap."""
        self._ranked, self._front = True, None
        ids = list(self._elites)
        vecs = [self._vec[i] for i in ids]
        ranks = lexicographic_ranks(vecs) if self.order == "lexicographic" else non_dominated_ranks(vecs)
        crowd = [0.0] * len(ids)
        for r in set(ranks):
            idx = [k for k, x in enumerate(ranks) if x == r]
            for k, d in zip(idx, crowding_distances([vecs[k] for k in idx]), strict=True):
                crowd[k] = d
        for k, pid in enumerate(ids):
            e = self._elites[pid]
            e.rank, e.crowding = int(ranks[k]), float(crowd[k])
            if self.scalar == "rank":
                e.score = -float(ranks[k])

    # -- state (archive snapshots) -------------------------------------------------------
    owns_state = True

    def _own_state(self) -> dict[str, Any]:
        names = list(self.objectives)
        return {
            "objectives_of": [[pid, [e.objectives[n] for n in names]] for pid, e in self._elites.items()],
            "niches": [[cell, list(ids)] for cell, ids in self._niches.items()],
            "binner": None if self._binner is None else [[float(x) for x in self._binner.ranges.lo],
                                                         [float(x) for x in self._binner.ranges.hi]],
        }

    def _load_own_state(self, state: dict[str, Any]) -> None:
        names = list(self.objectives)
        for pid, values in state["objectives_of"]:
            e = self._elites[pid]
            e.objectives = dict(zip(names, (float(v) for v in values), strict=True))
            self._vec[pid] = signed(e.objectives, self._directions)
        self._niches = {cell: list(ids) for cell, ids in state["niches"]}
        if (state["binner"] is None) != (self._binner is None):
            raise ValueError("state of a pareto archive with other niches")
        if self._binner is not None:
            lo, hi = state["binner"]
            self._binner.ranges.lo = np.asarray(lo, dtype=np.float64)
            self._binner.ranges.hi = np.asarray(hi, dtype=np.float64)
        self._ranked, self._front = False, None

    # -- reading ------------------------------------------------------------------------
    def elites(self, island: int | None = None) -> list[Elite]:
        if not self._ranked:
            self._rerank()
        return super().elites(island)

    def get(self, program_id: str) -> Elite | None:
        if not self._ranked:
            self._rerank()
        return super().get(program_id)

    def n_cells(self) -> int | None:
        return 1 if self._binner is None else self._binner.n_cells()

    def coverage(self) -> float:
        return len(self._niches) / (self.n_cells() or 1)

    def front(self) -> list[tuple[Elite, float]]:
        """The members no member dominates, each with its crowding distance among them (under
        ``nsga2`` these are the rank-0 members), widest spacing first, then insertion order."""
        if not self._ranked:
            self._rerank()
        if self._front is not None:
            return list(self._front)
        members = list(self._elites.values())
        ranks = non_dominated_ranks([self._vec[e.program_id] for e in members])
        front = [e for e, r in zip(members, ranks, strict=True) if r == 0]
        crowd = crowding_distances([self._vec[e.program_id] for e in front])
        order = sorted(range(len(front)), key=lambda i: (-crowd[i], i))
        self._front = [(front[i], crowd[i]) for i in order]
        return list(self._front)

    def stats(self) -> dict[str, Any]:
        out = super().stats()
        out.update({
            "objectives": dict(self.objectives), "order": self.order, "scalar": self.scalar,
            "niches": len(self._niches), "capacity": self.capacity,
            "front": [{"program_id": e.program_id, "objectives": dict(e.objectives), "cell": e.cell,
                       "crowding": d if math.isfinite(d) else None, "score": e.score} for e, d in self.front()],
        })
        return out
