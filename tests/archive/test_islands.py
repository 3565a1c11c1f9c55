"""Islands: routing, seeding, ring migration without duplicate code, replayed migrations."""

from __future__ import annotations

import pytest
from archive_streams import program_stream

from qdevolve.archive.islands import IslandsArchive
from qdevolve.errors import ConfigError
from qdevolve.types import EvalResult, Program


def test_seed_goes_everywhere_children_to_their_island() -> None:
    arc = IslandsArchive(n_islands=3, migration_interval=0, inner={"type": "dgm"})
    seed = Program(code="x = 0\n", run_id="r")
    ev = arc.add(seed, EvalResult(score=0.1))
    assert sorted(e.island for e in ev) == [0, 1, 2] and {e.kind for e in ev} == {"added"}
    child = Program(code="x = 1\n", run_id="r", parent_ids=(seed.id,), island=2)
    ev = arc.add(child, EvalResult(score=0.2))
    assert [(e.island, e.archive) for e in ev] == [(2, "islands")]
    assert arc.get(child.id).island == 2 and [e.program_id for e in arc.elites(0)] == [seed.id]
    # the child counts on every island's copy of the seed
    assert all(arc.islands[i].get(seed.id).children == 1 for i in range(3))
    with pytest.raises(ConfigError, match="island 5"):
        arc.add(Program(code="x = 2\n", run_id="r", parent_ids=(seed.id,), island=5), EvalResult(score=0.0))
    with pytest.raises(ConfigError):
        arc.elites(7)


def test_ring_migration_moves_top_fraction_and_keeps_ids() -> None:
    arc = IslandsArchive(n_islands=2, migration_interval=3, migration_fraction=0.5, inner={"type": "dgm"},
                         seed_all_islands=False)
    progs = [Program(code=f"y = {i}\n", run_id="r", parent_ids=("p",), island=0) for i in range(3)]
    events = []
    for i, p in enumerate(progs):
        events += arc.add(p, EvalResult(score=float(i)))
    migrated = [e for e in events if e.kind == "migrated"]
    # ceil(0.5 * 3) = 2 best of island 0 go to island 1, with the same program ids
    assert [(e.program_id, e.island, e.data["from_island"]) for e in migrated] == [
        (progs[2].id, 1, 0), (progs[1].id, 1, 0)]
    assert {e.program_id for e in arc.elites(1)} == {progs[1].id, progs[2].id}
    assert arc.stats()["migrations"] == 2


def test_migration_never_duplicates_code_on_target_and_migrants_do_not_remigrate() -> None:
    arc = IslandsArchive(n_islands=3, migration_interval=2, migration_fraction=1.0, inner={"type": "dgm"})
    stream = program_stream(300, seed=11, n_islands=3)  # 20% of children copy their parent's code
    n_mig = 0
    for p, r in stream:
        before = {i: {e.code_hash for e in arc.elites(i)} for i in range(3)}
        for e in arc.add(p, r):
            if e.kind != "migrated":
                continue
            n_mig += 1
            h = arc.islands[e.island].get(e.program_id).code_hash
            assert h not in before[e.island], "migration copied code already on the target"
            before[e.island].add(h)
            src = e.data["from_island"]
            assert (src, e.program_id) not in arc._migrants, "a migrant migrated again"
    assert n_mig > 10


def test_migration_replays_identically() -> None:
    spec = dict(n_islands=4, migration_interval=3, migration_fraction=0.25, inner={"type": "map_elites", "bins": 3})
    stream = program_stream(200, seed=5, n_islands=4)
    a, b = IslandsArchive(**spec), IslandsArchive(**spec)
    ea = [(e.program_id, e.kind, e.island, e.cell, e.replaced_id) for p, r in stream for e in a.add(p, r)]
    eb = [(e.program_id, e.kind, e.island, e.cell, e.replaced_id) for p, r in stream for e in b.add(p, r)]
    assert ea == eb and any(k == "migrated" for _, k, *_ in ea)
    assert a.stats() == b.stats()


@pytest.mark.parametrize("bad", [{"n_islands": 0}, {"migration_fraction": 1.5}, {"migration_interval": -1},
                                 {"inner": {"type": "islands"}}])
def test_bad_island_options(bad: dict) -> None:
    with pytest.raises(ConfigError):
        IslandsArchive(**bad)


def test_flat_inner_options_and_state() -> None:
    arc = IslandsArchive(n_islands=2, bins=3, feature_dimensions=["code_length"])
    assert arc.inner_spec == {"type": "map_elites", "bins": 3, "feature_dimensions": ["code_length"]}
    assert all(isl.n_cells() == 3 for isl in arc.islands)
    arc.add(Program(code="x = 1\n", run_id="r"), EvalResult(score=1.0))
    assert arc.state()["islands"][1]["ranges"] == [[6.0], [6.0]]  # the seed went to every island
    from qdevolve.errors import PluginError

    with pytest.raises(PluginError, match="nope"):
        IslandsArchive(nope=1)
