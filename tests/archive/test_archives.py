"""Contract tests run on every archive (parametrised like pyribs' archive tests)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from archive_streams import ARCHIVE_SPECS, archive_params, program_stream

from qdevolve import registry
from qdevolve.archive.base import EmptyArchiveError
from qdevolve.types import EVENT_KINDS, EvalResult, Program

pytestmark = pytest.mark.parametrize("name", archive_params())


def _make(name: str):
    return registry.archive.create(ARCHIVE_SPECS[name])


def _event_rows(events):
    return [(e.program_id, e.kind, e.archive, e.island, e.cell, e.replaced_id, e.score, e.data) for e in events]


def _elite_rows(arc):
    return [dataclasses.astuple(e) for e in arc.elites()]


def _stats(arc):
    s = arc.stats()
    return s


def test_contract_and_events(name: str) -> None:
    arc = _make(name)
    n_islands = arc.n_islands
    stream = program_stream(120, seed=1, n_islands=n_islands)
    admitted = set()
    for prog, res in stream:
        events = arc.add(prog, res)
        for ev in events:
            assert ev.kind in EVENT_KINDS
            assert 0 <= ev.island < n_islands
        if res.status != "ok":  # only migrations (triggered by the count of offers) may follow
            assert all(e.program_id != prog.id and e.kind == "migrated" for e in events)
        if any(e.program_id == prog.id and e.kind in ("added", "improved") for e in events):
            admitted.add(prog.id)
            assert arc.get(prog.id) is not None or name.startswith("map_elites") or name == "ribs"
    elites = arc.elites()
    assert elites, "some program must be admitted"
    ids = [e.program_id for e in elites]
    assert len(ids) == len(set(ids))
    assert set(ids) <= {p.id for p, r in stream if r.status == "ok"}
    for e in elites:
        assert arc.get(e.program_id) is not None
        assert e.code_hash and e.features
    s = arc.stats()
    for key in ("size", "coverage", "qd_score", "best_score", "best_program_id"):
        assert key in s
    assert 0.0 < s["coverage"] <= 1.0
    assert s["best_score"] == max(e.score for e in elites)
    assert arc.get(s["best_program_id"]).score == s["best_score"]
    if not name.startswith("islands"):
        assert s["size"] == len(elites)
        assert s["qd_score"] == pytest.approx(sum(e.score for e in elites))
    else:
        assert len(s["islands"]) == arc.n_islands
        assert s["size"] == sum(i["size"] for i in s["islands"])


def test_failed_programs_count_children_but_are_not_admitted(name: str) -> None:
    arc = _make(name)
    seed = Program(code="x = 1\n", run_id="r")
    assert arc.add(seed, EvalResult(score=1.0, metrics={"acc": 1.0, "size": 6.0}))  # pareto reads both
    for i, status in enumerate(["error", "timeout", "ok", "memory"]):
        child = Program(code=f"x = {i + 2}\n", run_id="r", parent_ids=(seed.id,), generation=1)
        res = EvalResult(status=status, score=None if status != "ok" else float("nan"))
        assert arc.add(child, res) == []
        assert arc.get(child.id) is None
    assert arc.get(seed.id).children == 4
    # a missing score and a re-add of the same program are not admitted either
    assert arc.add(Program(code="y = 2\n", run_id="r"), EvalResult(status="ok", score=None)) == []
    assert arc.add(seed, EvalResult(score=5.0)) == []


def test_replay_is_deterministic(name: str) -> None:
    a, b = _make(name), _make(name)
    stream = program_stream(150, seed=7, n_islands=a.n_islands)
    ev_a = [_event_rows(a.add(p, r)) for p, r in stream]
    ev_b = [_event_rows(b.add(p, r)) for p, r in stream]
    assert ev_a == ev_b
    assert _elite_rows(a) == _elite_rows(b)
    assert a.stats() == b.stats()
    if hasattr(a, "ranges"):
        assert a.ranges.state() == b.ranges.state()


def test_sample_and_inspirations(name: str) -> None:
    arc = _make(name)
    rule = registry.selection.create({"type": "uniform"})
    with pytest.raises(EmptyArchiveError, match="no elite"):
        arc.sample(np.random.default_rng(0), rule)
    for p, r in program_stream(80, seed=3, n_islands=arc.n_islands):
        arc.add(p, r)
    ids = {e.program_id for e in arc.elites()}
    picks = arc.sample(np.random.default_rng(0), rule, n=2)
    assert len(picks) == 2 and {e.program_id for e in picks} <= ids
    again = arc.sample(np.random.default_rng(0), rule, n=2)
    assert [e.program_id for e in again] == [e.program_id for e in picks]
    if arc.n_islands > 1:
        isl = arc.sample(np.random.default_rng(0), rule, island=1, n=3)
        assert {e.program_id for e in isl} <= {e.program_id for e in arc.elites(1)}
    parent = picks[0].program_id
    insp = arc.inspirations(parent, np.random.default_rng(1), n_best=2, n_diverse=2)
    assert parent not in {e.program_id for e in insp}
    assert len({e.program_id for e in insp}) == len(insp) == min(4, len(ids) - 1)
    others = sorted((e for e in arc.elites() if e.program_id != parent), key=lambda e: -e.score)
    assert [e.score for e in insp[:2]] == [e.score for e in others[:2]]
