"""One way to rebuild a run's archive from its database: the newest archive snapshot plus
the evaluations stored after it (or every evaluation, when there is no usable snapshot or a
history is wanted).

``qdevolve archive stats|plot`` read a run through :func:`rebuild`; the engine puts its
archive back through it when a ``tell``'s commit fails (:meth:`Evolution.reload_archive`).
Rows are replayed in the order the engine added them (by evaluation id), so the result is
the archive the engine had after its last stored child.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from qdevolve import registry
from qdevolve.archive.replay import Replay, replay
from qdevolve.db import streams
from qdevolve.db.store import LineageStore

__all__ = ["rebuild", "code_features", "metric_features", "feature_dimensions"]


def rebuild(store: LineageStore, run_id: str | None, *, points: int = 400,
            spec: dict[str, Any] | None = None) -> tuple[dict[str, Any], Replay]:
    """The run row and its replayed archive, with about ``points`` history points.

    With ``points <= 1`` (no history wanted) the replay starts from the run's newest usable
    archive snapshot (:mod:`qdevolve.db.snapshots`) and replays only the evaluations after
    it; otherwise, or without a snapshot, every evaluation is replayed. ``spec``: the
    archive spec when the caller has it (the engine; its plugins are loaded already), else
    the run's stored one, with the run's recorded plugin files that still exist loaded."""
    run = store.get_run(store.resolve_run(run_id))
    if spec is None:
        spec = (run.get("config") or {}).get("archive") or {"type": "map_elites"}
        for pf in store.plugin_files(run["id"]):
            if Path(pf["path"]).is_file():
                registry.load_plugin_file(pf["path"])
    start, after = (_from_snapshot(store, run["id"], spec) if points <= 1 else None), 0
    if start is not None:
        start, after = start
        n_eval = start.evaluated + store.count_evaluations_after(run["id"], after)
    else:
        n_eval = store.count_evaluations(run["id"])
    every = max(1, math.ceil(n_eval / max(points, 1)))
    code = code_features(spec)
    rows = streams.replay_stream(store, run["id"], code_features=code, metric_features=metric_features(spec),
                                 after_eval=after,
                                 covered=start.evaluated if start is not None else 0)
    return run, replay(spec, rows, record_every=every, start=start)


def _from_snapshot(store: LineageStore, run_id: str, spec: dict[str, Any]) -> tuple[Replay, int] | None:
    """The replay state at the run's newest usable snapshot and the evaluation id it covers."""
    from collections import Counter

    from qdevolve.archive.snapshot import FORMAT, restore
    from qdevolve.db import snapshots
    from qdevolve.db._rows import known_status

    snap = snapshots.latest(store, run_id, fmt=FORMAT)
    if snap is None:
        return None
    try:
        arc = restore(spec, snap.state)
    except (ValueError, KeyError, TypeError):  # another spec or layout: replay in full
        return None
    by_status: Counter[str] = Counter()
    for status, n in store.status_counts(run_id, up_to_eval=snap.eval_id).items():
        by_status[known_status(status, None)[0]] += n
    events = Counter(store.event_kind_counts(run_id, up_to_event=snap.event_id))
    return Replay(archive=arc, programs=snap.evaluations, evaluated=snap.evaluations, by_status=by_status,
                  events=events), snap.eval_id


def code_features(spec: dict[str, Any]) -> set[str] | None:
    """The built-in code features (``code_length``, ...) the archive computes, found on its
    feature extractors (islands included); ``None`` when it has none to inspect (a plugin
    archive: its code is loaded for every admitted row)."""
    dims = feature_dimensions(spec)
    return None if dims is None else {d for d in dims if d in streams.CODE_FEATURES}


def metric_features(spec: dict[str, Any]) -> set[str] | None:
    """The metrics the archive's ``add`` may read: its feature dimensions that may come from
    the evaluator's metrics (every one but ``score``: a metric of the same name wins over a
    built-in) and its objectives (``pareto``: never among the stored features, so every
    ``ok`` row's metrics are loaded); ``None`` for a plugin archive (metrics are loaded for
    every admitted row)."""
    archives = _archives(spec)
    dims = feature_dimensions(spec, archives)
    if dims is None:
        return None
    return {d for d in dims if d != "score"} | {n for a in archives for n in getattr(a, "objectives", None) or ()}


def _archives(spec: dict[str, Any]) -> list[Any]:
    """The archive the spec creates and its islands' archives."""
    found: list[Any] = []
    todo = [registry.archive.create(spec)]
    while todo:
        a = todo.pop()
        found.append(a)
        todo.extend(getattr(a, "islands", None) or [])
    return found


def feature_dimensions(spec: dict[str, Any], archives: list[Any] | None = None) -> set[str] | None:
    """Every feature dimension of the archive's extractors (islands included); ``None`` when
    it has no extractor to inspect."""
    found = [a.extractor for a in (archives or _archives(spec)) if getattr(a, "extractor", None) is not None]
    if not found:
        return None
    return {d for ex in found for d in ex.dimensions}
