"""The whole-run inspection paths on SQLite and PostgreSQL: the one-pass tree equals the
level-by-level tree, the scanned GraphML export reads back as the run graph, and ``archive
stats`` from a stored snapshot plus its tail equals a full replay."""

from __future__ import annotations

from pathlib import Path

import networkx as nx

from qdevolve import registry
from qdevolve.archive.replay import replay
from qdevolve.archive.snapshot import encode, snapshot
from qdevolve.cli import lineage as C
from qdevolve.cli.archive import rebuild
from qdevolve.db import lineage as L
from qdevolve.db import snapshots, streams
from qdevolve.db.store import LineageStore
from qdevolve.types import EvalResult, Program
from tests.db.conftest import random_tree


def _render(kids: dict, starts: list, depth: int) -> list[str]:
    lines = C._Lines(block=10**9)
    for i, s in enumerate(starts):
        C._grow(lines, s, kids, "score", depth, "", last=i == len(starts) - 1, level=0, path=set())
    return lines.buf


def test_one_pass_tree_equals_the_level_by_level_tree(store: LineageStore) -> None:
    rid = store.create_run(name="t")
    random_tree(store, rid, 2600, seed=5)
    assert store.count_programs(rid) > C._WIDE  # the CLI takes the one-pass path on this run
    for depth, top in ((4, 3), (50, 1000)):
        found: list = []
        whole = streams.tree_children(store, rid, top, roots=found)
        roots, total = L.roots(store, rid, top)
        assert [C._tuple(r) for r in roots] == found[:top] and total == len(found)
        stepwise = C._levels(store, rid, found[:top], depth, top)
        assert _render(whole, found[:top], depth) == _render(stepwise, found[:top], depth)


def test_scanned_graphml_reads_back_as_the_run_graph(store: LineageStore, tmp_path: Path) -> None:
    rid = store.create_run(name="g")
    progs = random_tree(store, rid, 600, seed=2)
    store.write(programs=[], edges=[(progs[3].id, progs[8].id, "inspiration")], run_id=rid)
    other = store.create_run(name="other")
    random_tree(store, other, 40, seed=9)
    g = L.run_graph(store, rid)
    old, new = tmp_path / "old.graphml", tmp_path / "new.graphml"
    L.export(g, old, "graphml")
    assert streams.export_run(store, rid, new, "graphml") == (g.number_of_nodes(), g.number_of_edges())
    a, b = nx.read_graphml(old), nx.read_graphml(new)
    nan = lambda gr: {n: {k: (None if v != v else v) for k, v in d.items()} for n, d in gr.nodes(data=True)}  # noqa: E731
    assert nan(a) == nan(b)
    assert sorted(a.edges(data=True)) == sorted(b.edges(data=True))


def test_stats_from_a_stored_snapshot_equal_a_full_replay(store: LineageStore) -> None:
    spec = {"type": "islands", "n_islands": 2, "migration_interval": 3, "feature_dimensions": ["w", "diversity"],
            "bins": 4}
    rid = store.create_run(name="s", config={"archive": spec})
    arc = registry.archive.create(spec)
    seed = Program(code="x = 0\n", run_id=rid)
    progs, results = [seed], [EvalResult(score=0.0, features={"w": 0.0})]
    for i in range(1, 120):
        parent = progs[(i * 7) % len(progs)]
        progs.append(Program(code=f"x = {i}\n" + "y = 1\n" * (i % 5), run_id=rid, parent_ids=(parent.id,),
                             island=i % 2, operator="diff"))
        results.append(EvalResult(score=float((i * 37) % 11), features={"w": float(i % 9)}) if i % 13
                       else EvalResult(status="error", error="x"))
    for i, (p, r) in enumerate(zip(progs, results, strict=True)):  # one tell per program, like the engine
        events = arc.add(p, r)
        store.write(programs=[p], evaluations=[(p.id, r)], events=events, run_id=rid,
                    snapshot=encode(snapshot(arc)) if i in (40, 90) else None)
    snap = snapshots.latest(store, rid)
    assert snap is not None and snap.evaluations == 91
    full = replay(spec, streams.replay_stream(store, rid, code_features={"diversity"}), record_every=10**9)
    _run, fast = rebuild(store, rid, points=1)
    assert encode(full.archive.stats()) == encode(fast.archive.stats())
    assert encode(snapshot(full.archive)) == encode(snapshot(fast.archive))
    assert (full.programs, full.evaluated, full.by_status, full.events) == \
        (fast.programs, fast.evaluated, fast.by_status, fast.events)
