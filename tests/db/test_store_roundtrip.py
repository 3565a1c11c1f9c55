"""LineageStore: every write kind round-trips, batches are atomic, ids accept prefixes."""

from __future__ import annotations

import math

import pytest

from qdevolve.db.store import LineageStore
from qdevolve.errors import DatabaseError
from qdevolve.types import ArchiveEvent, EvalResult, Program, Rollout


def _run(store: LineageStore) -> str:
    return store.create_run(name="t", config={"a": 1}, seed=7)


def test_programs_edges_evaluations_roundtrip(store: LineageStore) -> None:
    rid = _run(store)
    seed = Program(code="x = 1\n", run_id=rid, metadata={"note": "seed"})
    a = Program(code="x = 2\n", run_id=rid, parent_ids=(seed.id,), generation=1, operator="diff",
                policy_version=3, prompt_hash="ph")
    b = Program(code="x = 3\n", run_id=rid, parent_ids=(seed.id,), generation=1, island=2)
    c = Program(code="x = 5\n", run_id=rid, parent_ids=(a.id, b.id), generation=2, operator="crossover")
    res = EvalResult(score=0.25, metrics={"m": 1.5, "nan": float("nan")}, tests=[1.0, 0.0],
                     features={"f": 0.3}, artifacts={"stderr": "oops\n"}, runtime_s=0.5, peak_memory_mb=12.0)
    store.write(programs=[seed, a, b, c], evaluations=[(seed.id, res), (a.id, EvalResult(status="timeout", error="t"), "local")],
                edges=[(b.id, a.id, "inspiration")], run_id=rid)
    got = store.get_program(c.id)
    assert got.parent_ids == (a.id, b.id) and got.operator == "crossover" and got.generation == 2
    assert store.get_program(a.id).policy_version == 3
    assert store.get_program(a.id).parent_ids == (seed.id,)  # inspiration is not a parent
    assert store.get_program(seed.id).metadata == {"note": "seed"}
    r = store.get_evaluation(seed.id)
    assert r is not None and r.score == 0.25 and r.tests == [1.0, 0.0] and r.artifacts == {"stderr": "oops\n"}
    assert r.metrics["m"] == 1.5 and r.metrics["nan"] is None  # NaN stored as null, not invalid JSON
    assert store.get_evaluation(a.id).status == "timeout"
    assert store.get_evaluation(c.id) is None
    assert {p.id for p in store.unevaluated(rid)} == {b.id, c.id}
    seqs = [(seq, p.id) for seq, p, _ in store.iter_programs(rid, batch=2)]
    assert [pid for _, pid in seqs] == [seed.id, a.id, b.id, c.id]
    assert [pid for _, pid in [(s, p.id) for s, p, _ in store.iter_programs(rid, after_seq=seqs[1][0])]] == [b.id, c.id]
    assert store.count_programs(rid) == 4 and store.count_evaluations(rid) == 2
    assert store.find_code_hash(rid, a.code_hash) == a.id
    runs = store.list_runs()
    assert runs[0]["programs"] == 4 and runs[0]["best_score"] == 0.25


def test_latest_evaluation_wins(store: LineageStore) -> None:
    rid = _run(store)
    p = Program(code="y = 1\n", run_id=rid)
    store.add_program(p, EvalResult(score=1.0))
    store.add_evaluation(p.id, EvalResult(score=2.0))
    assert store.get_evaluation(p.id).score == 2.0
    assert [r.score for _, _, r in store.iter_programs(rid)] == [2.0]


def test_events_rollouts_state_policy_plugins(store: LineageStore) -> None:
    rid = _run(store)
    p = Program(code="z = 1\n", run_id=rid)
    ro = Rollout(prompt="P", completion="C", run_id=rid, program_id=p.id, token_ids=[1, 2],
                 logprobs=[-0.1, -0.2], policy_version=0, group_id="g")
    ev = ArchiveEvent(program_id=p.id, kind="added", archive="map_elites", cell="1,2", score=0.5,
                      data={"features": [0.1]}, run_id=rid)
    store.write(programs=[p], events=[ev], rollouts=[ro], run_id=rid, state={"rng": [1, 2, 3]})
    assert store.archive_events(rid)[0].cell == "1,2"
    assert store.archive_events(rid, archive="other") == []
    (seq, got), = store.rollouts(rid)
    assert got.token_ids == [1, 2] and got.logprobs == [-0.1, -0.2] and got.reward is None
    store.set_rollout_rewards([(ro.id, 0.7, [1.0, 0.0], "k")])
    assert store.rollouts(rid, evaluated_only=True)[0][1].reward_vector == [1.0, 0.0]
    assert store.get_state(rid, "rng") == [1, 2, 3]
    store.set_state(rid, "rng", {"x": 1})
    assert store.get_state(rid, "rng") == {"x": 1} and store.get_state(rid, "missing", 5) == 5
    store.add_policy_version(rid, 0, objective="grpo", metrics={"loss": 0.1}, state={"trainer": 1})
    store.add_policy_version(rid, 1, parent_version=0, objective="grpo", step=4, metrics={"kl": 0.01})
    assert [v["version"] for v in store.policy_versions(rid)] == [0, 1]
    assert store.latest_policy_version(rid)["metrics"] == {"kl": 0.01}
    assert store.get_state(rid, "trainer") == 1
    store.add_plugin_file(rid, "/x/p.py", "ab" * 32, [("selection", "mine")])
    assert store.plugin_files(rid)[0]["sha256"] == "ab" * 32


def test_batch_is_all_or_nothing(store: LineageStore) -> None:
    rid = _run(store)
    a = Program(code="a = 1\n", run_id=rid)
    store.write(programs=[a])
    fresh = [Program(code=f"b = {i}\n", run_id=rid) for i in range(50)]
    with pytest.raises(Exception):  # noqa: B017 - the driver's IntegrityError
        store.write(programs=[*fresh, Program(code="dup\n", run_id=rid, id=a.id)])
    assert store.count_programs(rid) == 1
    with pytest.raises(Exception):  # noqa: B017 - edge to an unknown parent violates a foreign key
        store.write(programs=fresh[:3], edges=[("nope" * 8, fresh[0].id, "inspiration")], run_id=rid)
    assert store.count_programs(rid) == 1


def test_prefix_ids_and_errors(store: LineageStore) -> None:
    rid = _run(store)
    p1 = Program(code="a\n", run_id=rid, id="abc111")
    p2 = Program(code="b\n", run_id=rid, id="abc222")
    p3 = Program(code="c\n", run_id=rid, id="a_c%33")
    store.write(programs=[p1, p2, p3])
    assert store.get_program("abc1").id == "abc111"
    assert store.get_program("a_c").id == "a_c%33"  # LIKE wildcards are escaped
    with pytest.raises(DatabaseError, match="ambiguous"):
        store.get_program("abc")
    with pytest.raises(DatabaseError, match="no program"):
        store.get_program("zzz")
    assert store.resolve_run(rid[:6]) == rid and store.resolve_run(None) == rid


def test_nonfinite_score_and_numpy_values(store: LineageStore) -> None:
    np = pytest.importorskip("numpy")
    rid = _run(store)
    p = Program(code="n\n", run_id=rid, metadata={"v": np.float32(1.5), "i": np.int64(3)})
    store.write(programs=[p], evaluations=[(p.id, EvalResult(score=math.inf, metrics={"x": np.float64(2.0)}))])
    assert store.get_evaluation(p.id).score is None
    assert store.get_program(p.id).metadata == {"v": 1.5, "i": 3}


def test_rows_without_run_id_take_their_programs_run(store: LineageStore) -> None:
    from qdevolve.db.lineage import run_graph

    rid = _run(store)
    a, b = Program(code="a\n", run_id=rid), Program(code="b\n", run_id=rid)
    store.write(programs=[a, b])
    store.write(edges=[(a.id, b.id, "inspiration")],
                events=[ArchiveEvent(program_id=b.id, kind="added", archive="dgm")],
                evaluations=[(b.id, EvalResult(score=1.0))])
    assert run_graph(store, rid).edges[a.id, b.id]["role"] == "inspiration"
    assert [e.program_id for e in store.archive_events(rid)] == [b.id]
    assert store.count_evaluations(rid) == 1
    with pytest.raises(DatabaseError, match="edge for unknown program id"):
        store.write(edges=[(a.id, "missing" * 4, "inspiration")])
