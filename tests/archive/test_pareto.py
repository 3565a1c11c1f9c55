"""The ``pareto`` archive: front per niche, crowding truncation, lexicographic order, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from archive_streams import ARCHIVE_SPECS, program_stream

from qdevolve import registry
from qdevolve.archive.pareto import ObjectiveError
from qdevolve.archive.replay import replay
from qdevolve.errors import ConfigError
from qdevolve.evolve.setup.config import parse_config
from qdevolve.types import EvalResult, Program

XY = {"x": "max", "y": "max"}


def _arc(**kw):
    return registry.archive.create({"type": "pareto", **kw})


def _offer(arc, code: str, **metrics: float):
    p = Program(code=code, run_id="r")
    return p, arc.add(p, EvalResult(score=1.0, metrics=metrics))


def _kinds(events):
    return [(e.kind, e.data.get("reason")) for e in events]


def test_dominated_rejected_dominating_evicts_with_directions() -> None:
    arc = _arc(objectives={"acc": "max", "size": "min"})
    p1, ev = _offer(arc, "a = 1\n", acc=0.5, size=10)
    assert _kinds(ev) == [("added", None)]
    assert _offer(arc, "a = 2\n", acc=0.4, size=12)[1] == [], "worse on both: dominated"
    assert _offer(arc, "a = 3\n", acc=0.5, size=10)[1] == [], "the same objective vector: not admitted"
    p3, ev = _offer(arc, "a = 4\n", acc=0.6, size=9)  # better on both (size is minimised)
    assert _kinds(ev) == [("removed", "dominated"), ("improved", None)]
    assert ev[0].program_id == p1.id and ev[1].replaced_id == p1.id
    p4, ev = _offer(arc, "a = 5\n", acc=0.9, size=20)  # a trade-off: joins the front
    assert _kinds(ev) == [("added", None)]
    assert {e.program_id for e in arc.elites()} == {p3.id, p4.id}
    front = arc.stats()["front"]
    assert {r["program_id"] for r in front} == {p3.id, p4.id}
    assert {tuple(r["objectives"].values()) for r in front} == {(0.6, 9.0), (0.9, 20.0)}


def test_full_front_lets_the_most_crowded_go() -> None:
    arc = _arc(objectives=XY, capacity=3)
    for code, x, y in (("a = 0\n", 0, 4), ("a = 1\n", 4, 0), ("a = 2\n", 1, 3)):
        _offer(arc, code, x=x, y=y)
    # front (0,4) (1,3) (2,2.5) (4,0); x and y span 4: d(1,3) = 2/4 + 1.5/4 = 0.875, d(2,2.5) = 3/4 + 3/4
    p, ev = _offer(arc, "a = 3\n", x=2, y=2.5)
    assert _kinds(ev) == [("removed", "crowded"), ("replaced", None)]
    gone = ev[0].program_id
    assert gone not in arc and p.id in arc
    assert sorted((e.objectives["x"], e.objectives["y"]) for e in arc.elites()) == [(0, 4), (2, 2.5), (4, 0)]
    # a newcomer tied for the smallest distance is the one that goes: nothing changes
    before = [e.program_id for e in arc.elites()]
    arc2 = _arc(objectives=XY, capacity=3)
    for code, x, y in (("a = 0\n", 0, 4), ("a = 1\n", 4, 0), ("a = 2\n", 1, 3)):
        _offer(arc2, code, x=x, y=y)
    kept = [e.program_id for e in arc2.elites()]
    assert _offer(arc2, "a = 9\n", x=3, y=1)[1] == []  # (1,3) and (3,1) both 1.5: the newest goes
    assert [e.program_id for e in arc2.elites()] == kept and before


def test_ranks_crowding_and_scalar_rules() -> None:
    for scalar, expect in (("score", [1.0, 1.0]), ("first", [0.0, 4.0]), ("rank", [0.0, 0.0])):
        arc = _arc(objectives=XY, scalar=scalar)
        _offer(arc, "a = 0\n", x=0, y=4)
        _offer(arc, "a = 1\n", x=4, y=0)
        assert [e.score for e in arc.elites()] == expect, scalar
        assert [e.rank for e in arc.elites()] == [0, 0]
        assert [e.crowding for e in arc.elites()] == [math.inf, math.inf]
    arc = _arc(objectives={"acc": "max", "size": "min"}, scalar="weighted", weights={"acc": 10, "size": 0.5})
    _offer(arc, "a = 0\n", acc=0.5, size=4)
    assert arc.elites()[0].score == pytest.approx(10 * 0.5 - 0.5 * 4)
    with pytest.raises(ConfigError, match="weights"):
        _arc(objectives=XY, scalar="weighted")
    with pytest.raises(ConfigError, match="'z'"):
        _arc(objectives=XY, scalar="weighted", weights={"z": 1})


def test_niches_keep_their_own_fronts_and_global_ranks() -> None:
    arc = _arc(objectives=XY, feature_dimensions=["code_length"], bins=2, ranges={"code_length": [0, 40]})
    short, _ = _offer(arc, "a = 1\n", x=1, y=1)  # 6 characters: niche "0"
    long, _ = _offer(arc, "a = 1  # " + "z" * 30 + "\n", x=5, y=5)  # niche "1"
    assert short.id in arc and long.id in arc, "dominated across niches, kept within its own"
    assert arc.get(short.id).cell != arc.get(long.id).cell
    assert arc.get(short.id).rank == 1 and arc.get(long.id).rank == 0
    assert [r["program_id"] for r in arc.stats()["front"]] == [long.id]
    assert arc.stats()["niches"] == 2


def test_lexicographic_order_keeps_the_best_by_priority() -> None:
    arc = _arc(objectives={"acc": "max", "size": "min"}, order="lexicographic", priority=["size"], capacity=2)
    a, _ = _offer(arc, "a = 1\n", acc=0.9, size=10)
    b, _ = _offer(arc, "a = 2\n", acc=0.5, size=5)
    c, ev = _offer(arc, "a = 3\n", acc=0.7, size=5)  # ties b on size, wins on acc; a is last: it goes
    assert _kinds(ev) == [("removed", "outranked"), ("replaced", None)] and ev[0].program_id == a.id
    assert [arc.get(c.id).rank, arc.get(b.id).rank] == [0, 1]
    assert _offer(arc, "a = 4\n", acc=0.99, size=6)[1] == [], "worse on the first priority: not admitted"
    assert arc.priority == ["size", "acc"]


def test_missing_or_bad_objective_names_the_key_and_changes_nothing() -> None:
    arc = _arc(objectives={"acc": "max", "size": "min"})
    p = Program(code="a = 1\n", run_id="r")
    with pytest.raises(ObjectiveError, match=r"objective 'size' is not among the evaluator's metrics \['acc'\]"):
        arc.add(p, EvalResult(score=1.0, metrics={"acc": 0.5}))
    with pytest.raises(ObjectiveError, match="'acc' must be a finite number"):
        arc.add(p, EvalResult(score=1.0, objectives={"acc": float("nan"), "size": 1.0}))
    assert arc.n_added == 0 and len(arc) == 0
    assert arc.add(p, EvalResult(score=1.0, objectives={"acc": 0.5, "size": 3.0}))  # objectives beat metrics
    assert arc.get(p.id).objectives == {"acc": 0.5, "size": 3.0}


@pytest.mark.parametrize(("spec", "match"), [
    ({}, "needs objectives"),
    ({"objectives": {"acc": "up"}}, "'max' or 'min'"),
    ({"objectives": {"combined_score": "max"}}, "metric name"),
    ({"objectives": XY, "order": "pareto"}, "archive.order"),
    ({"objectives": XY, "capacity": 0}, "capacity"),
    ({"objectives": XY, "priority": ["q"]}, "priority"),
])
def test_bad_specs_are_config_errors(spec, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        _arc(**spec)


def test_config_objectives_reach_the_pareto_archive_only() -> None:
    cfg = parse_config({"objectives": {"acc": "max", "len": "min"}, "archive": {"type": "pareto"}})
    assert cfg.archive == {"type": "pareto", "objectives": {"acc": "max", "len": "min"}}
    isl = parse_config({"objectives": {"acc": "max"}, "archive": {"type": "islands", "inner": "pareto"}})
    assert isl.archive["inner"] == {"type": "pareto", "objectives": {"acc": "max"}}
    with pytest.raises(ConfigError, match="needs an archive that reads them"):
        parse_config({"objectives": {"acc": "max"}})
    with pytest.raises(ConfigError, match="differs"):
        parse_config({"objectives": {"acc": "max"}, "archive": {"type": "pareto", "objectives": {"b": "min"}}})


def test_replay_of_the_stream_equals_the_live_archive() -> None:
    for name in ("pareto", "pareto_niches", "pareto_lexicographic"):
        live = registry.archive.create(ARCHIVE_SPECS[name])
        stream = program_stream(200, seed=5)
        for p, r in stream:
            live.add(p, r)
        rebuilt = replay(ARCHIVE_SPECS[name], [(i, p, r) for i, (p, r) in enumerate(stream)]).archive
        rows = [(e.program_id, e.objectives, e.rank, e.crowding, e.cell, e.score) for e in live.elites()]
        assert rows == [(e.program_id, e.objectives, e.rank, e.crowding, e.cell, e.score) for e in rebuilt.elites()]
        assert live.stats() == rebuilt.stats()
        assert len(live.stats()["front"]) >= (1 if name == "pareto_lexicographic" else 2), name


def test_crowded_tournament_prefers_lower_rank_then_wider_spacing() -> None:
    rule = registry.selection.create({"type": "crowded_tournament"})
    arc = _arc(objectives=XY, feature_dimensions=["code_length"], bins=2, ranges={"code_length": [0, 40]})
    _offer(arc, "a = 1\n", x=1, y=1)
    best, _ = _offer(arc, "a = 1  # " + "z" * 30 + "\n", x=5, y=5)
    for seed in range(5):  # two candidates, two entrants: the rank-0 one always wins
        assert arc.sample(np.random.default_rng(seed), rule)[0].program_id == best.id
    arc = _arc(objectives=XY)
    for code, x, y in (("a = 0\n", 0, 4), ("a = 1\n", 4, 0), ("a = 2\n", 1, 3)):
        _offer(arc, code, x=x, y=y)
    mid = next(e for e in arc.elites() if e.objectives == {"x": 1.0, "y": 3.0})
    picks = [arc.sample(np.random.default_rng(s), rule)[0].program_id for s in range(60)]
    assert picks.count(mid.program_id) < 30, "the crowded middle loses to either end"
    plain = registry.archive.create({"type": "map_elites", "bins": 2})
    plain.add(Program(code="a = 1\n", run_id="r"), EvalResult(score=1.0))
    with pytest.raises(ConfigError, match="archive type 'pareto'"):
        plain.sample(np.random.default_rng(0), rule)


def test_front_tables_per_island() -> None:
    from rich.console import Console

    from qdevolve.evolve.report import front_tables

    arc = registry.archive.create(ARCHIVE_SPECS["islands_pareto"])
    for p, r in program_stream(60, seed=2, n_islands=2):
        arc.add(p, r)
    tables = front_tables(arc.stats())
    assert [t.title.split(":")[0] for t in tables] == ["island 0", "island 1"]
    console = Console(width=120, record=True)
    for t in tables:
        console.print(t)
    text = console.export_text()
    for isl in arc.stats()["islands"]:
        for row in isl["front"]:
            assert row["program_id"][:12] in text
    assert front_tables(registry.archive.create({"type": "map_elites"}).stats()) == []


def test_a_widened_range_regroups_members_and_filters_each_niche() -> None:
    # running range over code_length, 2 bins: at first every program shares the range's middle
    arc = _arc(objectives=XY, feature_dimensions=["code_length"], bins=2)
    a, _ = _offer(arc, "a = 1\n", x=1, y=1)
    b, ev = _offer(arc, "a = 1 # " + "z" * 40 + "\n", x=2, y=2)  # the range widens: a and b in two niches
    assert a.id in arc and b.id in arc and arc.get(a.id).cell != arc.get(b.id).cell
    c, ev = _offer(arc, "a = 1 # " + "z" * 200 + "\n", x=0, y=0)  # widens again: a and b now share a niche
    kinds = _kinds(ev)
    assert ("removed", "regrouped") in kinds and a.id not in arc, "b dominates a once they share a niche"
    assert b.id in arc and c.id in arc
