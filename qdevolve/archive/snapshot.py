"""Archive snapshots: an archive's whole state as JSON, and the archive rebuilt from it.

``qdevolve archive stats`` rebuilds a run's archive by replaying ``add`` over every stored
evaluation (:mod:`qdevolve.archive.replay`); at 200,000 programs that replay is most of the
command's time. The engine therefore stores the archive's state with the run every
:data:`SNAPSHOT_EVERY` tells (table ``archive_snapshots``, written in the tell's own
transaction), and the reader restores the latest snapshot and replays only the evaluations
after it. Because ``add`` is deterministic and a snapshot holds *all* the state ``add`` reads
(elites in insertion order, children counts of every parent, feature ranges, the diversity
reference set, cell maps, k-NN bookkeeping, island counters and migrants), restoring a
snapshot taken after the first ``k`` adds and replaying the rest gives exactly the archive a
full replay gives (tests check this on real runs for every built-in kind).

Built-in kinds with a snapshot: ``map_elites`` (grid and CVT), ``novelty``, ``dgm``, ``ribs``
(its pyribs grid is refilled from the elites) and ``islands`` over any of them. A plugin
archive has none (:func:`snapshot` returns ``None``) and is always replayed in full.
Floats are written with ``repr`` precision (Python's ``json``), so values round-trip exactly;
non-finite ones use JSON's ``Infinity``/``NaN`` extension, which Python's ``json`` reads back.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from qdevolve import registry
from qdevolve.archive.base import ArchiveBase, FeatureRanges, PointCache
from qdevolve.archive.features import code_shape, token_shingles
from qdevolve.types import Elite

__all__ = ["SNAPSHOT_EVERY", "BYTES_PER_TELL", "FORMAT", "SnapshotSchedule", "snapshot", "restore",
           "supports", "encode", "decode"]

SNAPSHOT_EVERY = 1000  # tells between two snapshots: a reader replays at most this many adds
BYTES_PER_TELL = 2048  # a large state is written less often: at most ~2 KiB per tell on average
FORMAT = 1  # bumped when the state layout changes; a reader ignores other formats

_BUILTIN = ("map_elites", "novelty", "dgm", "ribs")


def supports(archive: Any) -> bool:
    """True when :func:`snapshot` can capture ``archive`` (a built-in kind, islands of them)."""
    from qdevolve.archive.islands import IslandsArchive

    if isinstance(archive, IslandsArchive):
        return all(supports(a) for a in archive.islands)
    return isinstance(archive, ArchiveBase) and type(archive).__module__.startswith("qdevolve.archive.") \
        and archive.name in _BUILTIN


class SnapshotSchedule:
    """Decides when a tell carries a snapshot: every ``every`` tells of this process, or
    less often for a large state (``len(encoded) / BYTES_PER_TELL`` tells), so writing
    snapshots costs at most about :data:`BYTES_PER_TELL` bytes per tell on average.

    ``every`` defaults to ``QDEVOLVE_SNAPSHOT_EVERY`` or :data:`SNAPSHOT_EVERY` (0: never).
    The engine calls :meth:`due` once per tell, right after that tell's ``archive.add``
    (never for seeds: every seed is added before the first seed is stored); it returns the
    encoded state to store in the same transaction as the tell's rows, or ``None``.
    """

    def __init__(self, every: int | None = None) -> None:
        self.every = int(every if every is not None else os.environ.get("QDEVOLVE_SNAPSHOT_EVERY", SNAPSHOT_EVERY))
        self.tells = 0
        self.next = self.every

    def due(self, archive: Any) -> str | None:
        self.tells += 1
        if self.every <= 0 or self.tells < self.next or not supports(archive):
            return None
        data = encode(snapshot(archive))
        self.next = self.tells + max(self.every, len(data) // BYTES_PER_TELL)
        return data


def encode(state: dict[str, Any] | None) -> str:
    """Compact JSON (floats exact; non-finite ones as ``Infinity``/``NaN``)."""
    return json.dumps(state, separators=(",", ":"))


def decode(data: str) -> dict[str, Any]:
    return json.loads(data)


# -- capture ---------------------------------------------------------------------------------
def _f(x: Any) -> float | None:
    return None if x is None else float(x)


def _elite(e: Elite) -> list[Any]:
    return [e.program_id, float(e.score), {k: float(v) for k, v in e.features.items()}, e.cell,
            int(e.island), e.code_hash, int(e.generation), int(e.children), _f(e.novelty)]


def _ranges(r: FeatureRanges) -> list[list[float]]:
    return [[float(x) for x in r.lo], [float(x) for x in r.hi]]


def _points(p: PointCache) -> list[Any]:
    return [list(p.ids), p.raw.tolist()]


def _base(a: ArchiveBase, children: bool = True) -> dict[str, Any]:
    ex = a.extractor
    st: dict[str, Any] = {
        "kind": a.name, "island": a.island, "n_added": a.n_added, "n_ok": a.n_ok,
        "elites": [_elite(e) for e in a._elites.values()],
        "reference": [[pid, code] for (pid, _), (code, _) in zip(ex._reference, ex._reference_code, strict=True)],
    }
    if children:
        st["children"] = [list(a._children), list(a._children.values())]
    if isinstance(getattr(a, "ranges", None), FeatureRanges):
        st["ranges"] = _ranges(a.ranges)
    if a.name == "map_elites":
        st["cells"] = [list(a._cells), list(a._cells.values())]
    elif a.name == "novelty":
        st.update(counter=a._counter, dirty=a._dirty, points=_points(a._points), knn=a._knn.tolist(),
                  knn_valid=a._knn_valid)
    elif a.name == "dgm":
        st.update(counter=a._counter, first_score=a._first_score, points=_points(a._points))
    elif a.name == "ribs":  # pyribs keeps a running objective sum: its rounding is history
        st["objective_sum"] = float(a._ribs._objective_sum)
    return st


def snapshot(archive: Any) -> dict[str, Any] | None:
    """The archive's complete state as a JSON-ready dict (``None``: a kind without one)."""
    if not supports(archive):
        return None
    if not hasattr(archive, "islands"):
        return {"format": FORMAT, "archive": _base(archive)}
    isl = archive.islands
    shared = all(a._children == isl[0]._children for a in isl[1:])  # the usual case: stored once
    return {"format": FORMAT, "archive": {
        "kind": "islands", "offered": list(archive._offered), "n_migrations": archive.n_migrations,
        "migrants": sorted([i, pid] for i, pid in archive._migrants),
        "children": [list(isl[0]._children), list(isl[0]._children.values())] if shared else None,
        "islands": [_base(a, children=not shared) for a in isl]}}


# -- restore ---------------------------------------------------------------------------------
def _load_points(p: PointCache, data: list[Any]) -> None:
    ids, raw = data
    for pid, row in zip(ids, raw, strict=True):
        p.append(pid, np.asarray(row, dtype=np.float64))


def _load_base(a: ArchiveBase, st: dict[str, Any], children: list[Any] | None) -> None:
    if st["kind"] != a.name:
        raise ValueError(f"snapshot of a {st['kind']} archive, run archive is {a.name}")
    a.island, a.n_added, a.n_ok = int(st["island"]), int(st["n_added"]), int(st["n_ok"])
    keys, counts = children if children is not None else st["children"]
    a._children = dict(zip(keys, (int(c) for c in counts), strict=True))
    ex = a.extractor
    for pid, code in st["reference"]:
        ex._reference.append((pid, token_shingles(code)))
        ex._reference_code.append((code, code_shape(code)))
    elites = {}
    for pid, score, feats, cell, island, code_hash, gen, kids, nov in st["elites"]:
        elites[pid] = Elite(program_id=pid, score=score, features=feats, cell=cell, island=island,
                            code_hash=code_hash, generation=gen, children=kids, novelty=nov)
    a._elites = elites
    if "ranges" in st:
        lo, hi = st["ranges"]
        a.ranges.lo, a.ranges.hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    if a.name == "map_elites":
        a._cells = dict(zip(*st["cells"], strict=True))
    elif a.name == "novelty":
        a._counter, a._dirty, a._knn_valid = int(st["counter"]), bool(st["dirty"]), bool(st["knn_valid"])
        _load_points(a._points, st["points"])
        a._knn = np.asarray(st["knn"], dtype=np.float64).reshape(-1, a.k)
    elif a.name == "dgm":
        a._counter, a._first_score = int(st["counter"]), st["first_score"]
        _load_points(a._points, st["points"])
    elif a.name == "ribs":
        for e in elites.values():  # elitist grid: one elite per cell, so refilling reproduces it
            a._ribs.add_single(e.program_id, e.score, a._measures(e))
        if elites:  # the stored running sum, so the QD-score has the same rounding as a replay
            best = max(elites.values(), key=lambda e: e.score)
            total = np.asarray(st["objective_sum"], dtype=a._ribs.dtypes["objective"])
            a._ribs._stats_update(total, a._ribs.index_of_single(a._measures(best)))


def restore(spec: dict[str, Any] | str, state: dict[str, Any]) -> Any:
    """A new archive from ``spec`` with the state of :func:`snapshot` loaded into it.

    Raises:
        ValueError: the snapshot does not fit the spec (another kind, island count or format).
    """
    if state.get("format") != FORMAT:
        raise ValueError(f"snapshot format {state.get('format')!r}, this qdevolve reads {FORMAT}")
    arc = registry.archive.create(spec)
    st = state["archive"]
    if st["kind"] != "islands":
        if not supports(arc):
            raise ValueError(f"archive {getattr(arc, 'name', arc)!r} has no snapshot")
        _load_base(arc, st, None)
        return arc
    if not hasattr(arc, "islands") or len(arc.islands) != len(st["islands"]) or not supports(arc):
        raise ValueError("snapshot islands do not match the run's archive")
    for a, ist in zip(arc.islands, st["islands"], strict=True):
        _load_base(a, ist, st["children"])
    arc._offered = [int(x) for x in st["offered"]]
    arc.n_migrations = int(st["n_migrations"])
    arc._migrants = {(int(i), pid) for i, pid in st["migrants"]}
    return arc
