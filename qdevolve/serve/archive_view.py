"""The archive of a run as the page draws it: elites, a feature-space grid, and progress curves.

The elites are found by replaying ``archive_events`` in order (``added`` puts a program in,
``improved`` puts one in and takes ``replaced_id`` out, ``removed`` takes one out), per island.
The grid is recomputed from each elite's stored features, never from the stored cell string,
because a MAP-Elites archive with running ranges re-bins its elites without writing events.
Binning follows the archive (pyribs' ``GridArchive`` rule):
``index = clip(floor((b * (v - lo) + 1e-6) / (hi - lo)), 0, b - 1)``, with ``[lo, hi]`` the
configured range or, where none is configured, the min/max of the admitted programs' values.
Axes are labelled with the bins' real value intervals. An archive that is not a 2-D grid
(CVT, novelty, DGM) is drawn as a scatter of its best ``MAX_ELITES`` elites.

QD-score (Pugh et al. 2016) after each event is ``sum over elites of (score - qd_offset)``
(``qd_offset`` from the archive config, default 0; a program held by two islands counts twice,
as the islands archive reports it). The best score is the running maximum over ``ok``
evaluations. Both are plotted against the number of evaluations so far.
"""

from __future__ import annotations

import math
from typing import Any

from qdevolve.serve import queries as Q
from qdevolve.serve.db import ReadOnlyDB

__all__ = ["archive_view"]

_EPS = 1e-6
MAX_POINTS = 2000
MAX_ELITES = 5000  # elites listed for a scatter (the best ones); ``n_elites`` counts them all


def _spec(config: dict[str, Any]) -> dict[str, Any]:
    spec = config.get("archive") or {}
    if isinstance(spec, str):
        spec = {"type": spec}
    inner = spec.get("inner")
    if spec.get("type") == "islands":
        inner = inner if isinstance(inner, dict) else {"type": inner or "map_elites"}
        merged = {k: v for k, v in spec.items() if k not in ("type", "inner", "n_islands", "migration_interval",
                                                               "migration_fraction", "seed_all_islands")}
        return {**merged, **inner, "outer": "islands", "qd_offset": spec.get("qd_offset", inner.get("qd_offset", 0))}
    return dict(spec)


def _per_dim(value: Any, dims: list[str], default: Any) -> list[Any]:
    if isinstance(value, dict):
        return [value.get(d, default) for d in dims]
    if isinstance(value, (list, tuple)):
        if value and not isinstance(value[0], (list, tuple, type(None))) and len(dims) != len(value) == 2 \
                and all(isinstance(x, (int, float)) for x in value):
            return [list(value)] * len(dims)  # one [lo, hi] for every dimension
        return [value[i] if i < len(value) else default for i in range(len(dims))]
    return [value if value is not None else default] * len(dims)


def _bin(v: float, lo: float, hi: float, b: int) -> int:
    if hi <= lo:
        return 0
    return int(min(max(math.floor((b * (v - lo) + _EPS) / (hi - lo)), 0), b - 1))


def _fmt(x: float) -> str:
    return f"{x:.3g}"


def _downsample(points: list[list[float]]) -> list[list[float]]:
    if len(points) <= MAX_POINTS:
        return points
    step = len(points) / MAX_POINTS
    keep = [points[int(k * step)] for k in range(MAX_POINTS)]
    return keep + [points[-1]]


def archive_view(db: ReadOnlyDB, run: dict[str, Any]) -> dict[str, Any]:
    """Elites, grid (or scatter) and curves of ``run`` (a dict from :func:`queries.resolve_run`)."""
    spec = _spec(run.get("config") or {})
    events = Q.archive_events(db, run["id"])
    elites: dict[tuple[Any, str], dict[str, Any]] = {}  # (island, program id) -> event
    qd_offset = float(spec.get("qd_offset") or 0.0)
    evals = Q.evaluation_scores(db, run["id"])
    eval_index: dict[str, int] = {}
    best_curve: list[list[float]] = []
    best = -math.inf
    for k, (pid, status, score) in enumerate(evals, start=1):
        eval_index.setdefault(pid, k)
        if status == "ok" and score is not None and score > best:
            best = score
            best_curve.append([k, score])
    if evals and best_curve and best_curve[-1][0] != len(evals):
        best_curve.append([len(evals), best])
    qd_curve: list[list[float]] = []
    qd = 0.0
    for ev in events:
        key = (ev["island"], ev["program_id"])
        if ev["kind"] == "removed":
            gone = elites.pop(key, None)
            qd -= (gone["score"] or 0.0) - qd_offset if gone else 0.0
        else:
            if ev["kind"] == "improved" and ev.get("replaced_id"):
                gone = elites.pop((ev["island"], ev["replaced_id"]), None)
                qd -= (gone["score"] or 0.0) - qd_offset if gone else 0.0
            old = elites.get(key)
            if old is not None:
                qd -= (old["score"] or 0.0) - qd_offset
            elites[key] = ev
            qd += (ev["score"] or 0.0) - qd_offset
        x = eval_index.get(ev["program_id"], qd_curve[-1][0] if qd_curve else 0)
        qd_curve.append([x, qd])
    dims = list(spec.get("feature_dimensions") or [])
    grid_ok = len(dims) == 2 and not spec.get("cvt_cells") and spec.get("type", "map_elites") == "map_elites"
    kept = list(elites.values())
    if not grid_ok and len(kept) > MAX_ELITES:  # DGM / novelty archives can hold most of a run
        kept = sorted(kept, key=lambda e: -(e["score"] if e["score"] is not None else -math.inf))[:MAX_ELITES]
    feats = Q.features_of(db, sorted({e["program_id"] for e in kept}))
    elite_rows = [{"program_id": e["program_id"], "island": e["island"], "score": e["score"],
                   "stored_cell": e["cell"], "features": feats.get(e["program_id"], {})} for e in kept]
    if not dims:
        keys = sorted({k for e in elite_rows for k, v in (e["features"] or {}).items() if isinstance(v, (int, float))})
        dims = keys[:2]
    out: dict[str, Any] = {"run_id": run["id"], "archive": spec.get("outer") or spec.get("type"),
                           "feature_dimensions": dims, "elites": elite_rows, "n_elites": len(elites),
                           "qd_offset": qd_offset, "evaluations": len(evals),
                           "best_curve": _downsample(best_curve), "qd_curve": _downsample(qd_curve),
                           "grid": None}
    if grid_ok:
        out["grid"] = _grid(spec, dims, elite_rows)
    from qdevolve.serve.front_view import front_view

    out["pareto"] = front_view(db, run["id"], spec, {e["program_id"] for e in elites.values()})
    if len(elite_rows) > MAX_ELITES:
        out["elites"] = sorted(elite_rows, key=lambda e: -(e["score"] if e["score"] is not None else -math.inf))[:MAX_ELITES]
    return out


def _grid(spec: dict[str, Any], dims: list[str], elites: list[dict[str, Any]]) -> dict[str, Any]:
    bins = [int(b) for b in _per_dim(spec.get("bins", 10), dims, 10)]
    ranges = _per_dim(spec.get("ranges"), dims, None)
    lohi = []
    for d, r in zip(dims, ranges, strict=True):
        if r is not None and r[0] is not None and r[1] is not None:
            lohi.append((float(r[0]), float(r[1])))
            continue
        vals = [float(e["features"][d]) for e in elites if isinstance((e["features"] or {}).get(d), (int, float))]
        lohi.append((min(vals), max(vals)) if vals else (0.0, 1.0))
    cells: dict[tuple[int, int], dict[str, Any]] = {}
    for e in elites:
        f = e["features"] or {}
        if not all(isinstance(f.get(d), (int, float)) for d in dims) or e["score"] is None:
            continue
        ij = tuple(_bin(float(f[d]), lo, hi, b) for d, (lo, hi), b in zip(dims, lohi, bins, strict=True))
        cur = cells.get(ij)
        if cur is None or e["score"] > cur["score"]:
            cells[ij] = e
    labels = []
    for (lo, hi), b in zip(lohi, bins, strict=True):
        w = (hi - lo) / b if b else 0.0
        labels.append([f"{_fmt(lo + k * w)}–{_fmt(lo + (k + 1) * w)}" for k in range(b)])
    return {"bins": bins, "ranges": [list(x) for x in lohi], "labels": labels,
            "cells": [{"x": i, "y": j, "score": e["score"], "program_id": e["program_id"], "island": e["island"],
                       "features": {d: e["features"][d] for d in dims}} for (i, j), e in sorted(cells.items())],
            "coverage": len(cells) / max(1, bins[0] * bins[1])}
