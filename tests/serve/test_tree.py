"""The lineage cut: incremental extension equals a rebuild; the chosen nodes form a tree."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import insert

from qdevolve.db import schema as S
from qdevolve.serve import queries as Q
from qdevolve.serve.db import ReadOnlyDB
from qdevolve.serve.tree import LineageCache, RunLineage, TreeQuery

from . import synth


def _by_id(payload: dict) -> dict:
    return {**payload, "nodes": sorted(payload["nodes"], key=lambda n: n["id"])}


def test_extending_a_cached_lineage_equals_rebuilding_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "run.sqlite"
    rid = synth.synthetic_run(path, 3000, seed=5)
    db = ReadOnlyDB(str(path))
    cache = LineageCache(db)
    first = cache.get(rid)
    builds = []
    real = RunLineage.from_rows.__func__
    monkeypatch.setattr(RunLineage, "from_rows", classmethod(lambda cls, rows: builds.append(1) or real(cls, rows)))
    eng = synth.engine(path)
    with eng.begin() as con:  # another run writing into the same database in between
        con.execute(insert(S.runs).values(id="other", name="other", config="{}", created_at=0.0, updated_at=0.0))
    synth.add_program(eng, "other", code="o", score=1.0)
    a = synth.add_program(eng, rid, code="a", parents=[first.ids[10]], score=99.0)
    b = synth.add_program(eng, rid, code="b", parents=[a, first.ids[20]], status=None)  # crossover, pending
    synth.add_program(eng, rid, code="c", parents=[b], score=5.0, operator="new-op")
    eng.dispose()
    grown = cache.get(rid)
    assert builds == [], "the cached lineage was extended, not rebuilt"
    full = RunLineage.from_rows(Q.lineage_rows(db, rid))
    assert grown is not first and len(grown.ids) == 3003 and grown.ids == full.ids
    assert (grown.parent == full.parent).all() and (grown.subtree == full.subtree).all()
    assert grown.status == full.status and grown.extra_parents == full.extra_parents == {grown.index[b]: [first.ids[20]]}
    assert np.array_equal(np.nan_to_num(grown.score, nan=-1.0), np.nan_to_num(full.score, nan=-1.0))
    assert grown.facets_all == full.facets_all and "new-op" in grown.facets_all["operators"]
    assert grown.best_all == full.best_all == grown.index[a]
    for q in (TreeQuery(limit=200), TreeQuery(limit=300, statuses=frozenset({"failed"})),
              TreeQuery(root=first.ids[10], limit=50), TreeQuery(gen_min=5, gen_max=9, operators=frozenset({"ast"}))):
        assert _by_id(grown.select(q)) == _by_id(full.select(q))
    assert first.subtree[first.index[first.ids[10]]] + 3 == grown.subtree[grown.index[first.ids[10]]]
    db.close()


def test_selection_keeps_best_path_and_its_children(tmp_path: Path) -> None:
    path = tmp_path / "run.sqlite"
    rid = synth.synthetic_run(path, 2000, seed=9)
    db = ReadOnlyDB(str(path))
    lin = RunLineage.from_rows(Q.lineage_rows(db, rid))
    out = lin.select(TreeQuery(limit=150))
    shown = {n["id"] for n in out["nodes"]}
    path_ids = [n["id"] for n in out["nodes"] if n["best_path"]]
    assert out["best"] == path_ids[-1] or out["best"] in path_ids
    i = lin.index[out["best"]]
    chain = []
    while i >= 0:
        chain.append(lin.ids[i])
        i = int(lin.parent[i])
    assert set(chain) <= shown and set(chain) == set(path_ids)
    for pid in chain[1:]:  # children of the path (failures included) come before the other top scores
        kids = [lin.ids[c] for c in lin.children[lin.index[pid]]]
        assert set(kids) <= shown or len(shown) >= 150
    db.close()
