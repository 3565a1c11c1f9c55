"""Archive snapshots: a snapshot after any prefix of adds, restored and then fed the rest,
is exactly the archive a full replay builds (every built-in kind)."""

from __future__ import annotations

import math

import pytest

from qdevolve import registry
from qdevolve.archive.snapshot import SnapshotSchedule, decode, encode, restore, snapshot, supports
from qdevolve.errors import ConfigError
from qdevolve.types import EvalResult, Program
from tests.archive.archive_streams import ARCHIVE_SPECS, archive_params, program_stream

EXTRA = {
    "novelty_capped": {"type": "novelty", "k": 2, "threshold": 0.05, "max_size": 6},
    "dgm_capped": {"type": "dgm", "keep": "better", "noise": 0.3, "max_size": 7},
    "islands_novelty": {"type": "islands", "n_islands": 2, "migration_interval": 3, "migration_fraction": 0.5,
                        "inner": {"type": "novelty", "k": 2, "threshold": 0.1}},
}
SPECS = {**ARCHIVE_SPECS, **EXTRA}


def _add_all(arc, stream) -> list:
    return [[(e.kind, e.program_id, e.cell, e.island, e.replaced_id) for e in arc.add(p, r)] for p, r in stream]


def _same(a, b) -> None:
    sa, sb = a.stats(), b.stats()  # first: reading a novelty archive refreshes its lazy k-NN cache
    assert encode(sa) == encode(sb)
    assert encode(snapshot(a)) == encode(snapshot(b))
    assert [(e.program_id, e.score, e.cell, e.children, e.novelty) for e in a.elites()] == \
        [(e.program_id, e.score, e.cell, e.children, e.novelty) for e in b.elites()]


@pytest.mark.parametrize("name", [*archive_params(), *EXTRA])
def test_snapshot_then_the_rest_equals_a_full_replay(name: str) -> None:
    spec = SPECS[name]
    islands = spec.get("n_islands", 1)
    stream = program_stream(90, seed=7, n_islands=islands)
    full = registry.archive.create(spec)
    full_events = _add_all(full, stream)
    assert len(full) > 0
    for k in (1, 13, 45, 89):
        head = registry.archive.create(spec)
        head_events = _add_all(head, stream[:k])
        state = decode(encode(snapshot(head)))  # through JSON, as stored
        back = restore(spec, state)
        _same(head, back)
        tail_events = _add_all(back, stream[k:])
        assert head_events + tail_events == full_events, f"events differ after a snapshot at {k}"
        _same(full, back)


def test_only_built_in_kinds_have_a_snapshot() -> None:
    class Plugin:
        name = "plugin"

    assert not supports(Plugin())
    assert snapshot(Plugin()) is None
    assert supports(registry.archive.create({"type": "islands", "n_islands": 2}))


def test_a_snapshot_of_another_kind_is_refused() -> None:
    arc = registry.archive.create({"type": "map_elites"})
    for p, r in program_stream(5):
        arc.add(p, r)
    with pytest.raises(ValueError):
        restore({"type": "dgm"}, snapshot(arc))
    with pytest.raises(ValueError):
        restore({"type": "islands", "n_islands": 2}, snapshot(arc))
    with pytest.raises(ValueError):
        restore({"type": "map_elites"}, {**snapshot(arc), "format": 999})


def test_schedule_is_due_every_n_tells_and_less_often_for_a_large_state() -> None:
    arc = registry.archive.create({"type": "dgm"})
    sched = SnapshotSchedule(every=3)
    due = []
    for i, (p, r) in enumerate(program_stream(12, fail_rate=0.0)):
        arc.add(p, r)
        if sched.due(arc) is not None:
            due.append(i + 1)
    assert due == [3, 6, 9, 12]
    sched = SnapshotSchedule(every=1)
    data = sched.due(arc)
    assert data is not None and sched.next == 1 + max(1, len(data) // 2048)
    assert SnapshotSchedule(every=0).due(arc) is None


def test_an_unplaceable_program_changes_nothing_before_it_raises() -> None:
    """The engine retries an unplaceable program as ``invalid``: the live archive must then
    equal a replay of the stored (invalid) row, so the failed first add may change nothing."""
    for spec in ({"type": "map_elites", "feature_dimensions": ["w"]},
                 {"type": "islands", "n_islands": 2, "feature_dimensions": ["w"]}):
        live, replayed = registry.archive.create(spec), registry.archive.create(spec)
        seed = Program(code="a = 1\n", run_id="r")
        child = Program(code="a = 2\n", run_id="r", parent_ids=(seed.id,), island=1)
        for arc in (live, replayed):
            arc.add(seed, EvalResult(score=1.0, features={"w": 0.5}))
        bad = EvalResult(score=2.0, features={})
        with pytest.raises(ConfigError):
            live.add(child, bad)
        bad.status, bad.score = "invalid", None
        live.add(child, bad)
        replayed.add(child, EvalResult(status="invalid", error="archive: x"))
        _same(live, replayed)
        assert math.isfinite(live.stats()["qd_score"])


def test_a_subclass_with_more_state_is_replayed_not_snapshotted() -> None:
    """``owns_state`` is declared by each class for itself: a plugin subclass of a built-in
    archive that keeps more state does not inherit it, so it is always replayed in full."""
    from qdevolve.archive.map_elites import MapElitesArchive

    class Counting(MapElitesArchive):
        def add(self, program, result):  # type: ignore[no-untyped-def]
            self.seen = getattr(self, "seen", 0) + 1
            return super().add(program, result)

    assert supports(MapElitesArchive(feature_dimensions=["code_length"]))
    assert not supports(Counting(feature_dimensions=["code_length"]))
    assert snapshot(Counting(feature_dimensions=["code_length"])) is None
