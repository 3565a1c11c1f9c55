"""The streamed whole-run views equal the networkx-based ones they replace."""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
import pytest

from qdevolve.db import lineage as L
from qdevolve.db import streams
from qdevolve.db.store import LineageStore
from tests.db.conftest import random_tree


@pytest.fixture
def run(tmp_path: Path) -> tuple[LineageStore, str, list]:
    st = LineageStore(tmp_path / "s.sqlite", create=True)
    rid = st.create_run(name="s")
    progs = random_tree(st, rid, 400, seed=3)
    other = st.create_run(name="other")  # a second run must not leak into the first's views
    random_tree(st, other, 30, seed=4)
    st.write(programs=[], edges=[(progs[5].id, progs[9].id, "inspiration")], run_id=rid)
    yield st, rid, progs
    st.close()


@pytest.mark.parametrize("fmt", ["graphml", "json", "dot"])
def test_streamed_export_equals_the_graph_export(run, tmp_path: Path, fmt: str) -> None:
    st, rid, progs = run
    g = L.run_graph(st, rid)
    old, new = tmp_path / f"old.{fmt}", tmp_path / f"new.{fmt}"
    L.export(g, old, fmt)
    assert streams.export_run(st, rid, new, fmt) == (g.number_of_nodes(), g.number_of_edges())
    if fmt == "graphml":
        a, b = nx.read_graphml(old), nx.read_graphml(new)
        assert _no_nan(a) == _no_nan(b)
        assert sorted(a.edges(data=True)) == sorted(b.edges(data=True))
    elif fmt == "json":
        a, b = json.loads(old.read_text()), json.loads(new.read_text())
        assert {n["id"]: n for n in a["nodes"]} == {n["id"]: n for n in b["nodes"]}
        key = lambda e: (e["source"], e["target"], e["role"])  # noqa: E731
        assert sorted(a["edges"], key=key) == sorted(b["edges"], key=key)
    else:
        assert sorted(old.read_text().splitlines()) == sorted(new.read_text().splitlines())


def _no_nan(g: nx.DiGraph) -> dict:
    """Node attributes with NaN (an unevaluated score) as None, so equal graphs compare equal."""
    return {n: {k: (None if v != v else v) for k, v in d.items()} for n, d in g.nodes(data=True)}


def test_ranked_children_equal_the_per_node_query(run) -> None:
    st, rid, progs = run
    parents = [p.id for p in progs[:60]]
    ranked = streams.children_of(st, parents, 3)
    whole = streams.all_children(st, rid, 3)
    for pid in parents:
        kids, total = L.children(st, pid, 3)
        assert ranked[pid] == (kids, total)
        assert whole.get(pid, ([], 0)) == (kids, total)
