"""Row mappers, named records, the JSON codec's hostile inputs, schema migration, run lease."""

from __future__ import annotations

import math
import sqlite3
import time
from pathlib import Path

import numpy as np
import pytest

from qdevolve.db import _rows
from qdevolve.db import schema as S
from qdevolve.db._codec import dumps, loads, text
from qdevolve.db.records import EdgeRecord, EvaluationRecord, RewardRecord
from qdevolve.db.store import LineageStore, RunLocked
from qdevolve.types import EvalResult, Program, Rollout


def test_every_mapper_writes_exactly_its_tables_columns() -> None:
    for mapper in (_rows.PROGRAM, _rows.EDGE, _rows.EVALUATION, _rows.EVENT, _rows.ROLLOUT, _rows.STATE):
        generated = {c.name for c in mapper.table.columns if c.primary_key and c.autoincrement is True}
        assert set(mapper.columns) == {c.name for c in mapper.table.columns} - generated
    assert "worker" in _rows.EVALUATION.columns


def test_codec_survives_surrogates_nan_inf_and_numpy() -> None:
    value = {"a": float("nan"), "b": float("inf"), "c": -math.inf, "d": np.float32(1.5), "e": np.arange(3),
             "s": "x\ud800y", (1, 2): (3, 4)}
    s = dumps(value)
    s.encode("utf-8")  # valid UTF-8 text for the TEXT column
    assert loads(s) == {"a": None, "b": "inf", "c": "-inf", "d": 1.5, "e": [0, 1, 2], "s": "x\ud800y",
                        "(1, 2)": [3, 4]}
    assert loads(dumps({"s": "\udfff only"})) == {"s": "\udfff only"}  # fast path's fallback keeps it
    assert text("ok") == "ok" and text("bad\ud800") == "bad\ufffd" and text(None) is None


def test_hostile_values_are_stored_not_crashed_on(store: LineageStore) -> None:
    rid = store.create_run(name="hostile\ud800")
    seed = Program(code="x = 1  # \ud800\n", run_id=rid)
    child = Program(code="x = 2\n", run_id=rid, parent_ids=(seed.id,), operator="diff", metadata={"r": "\udc80"})
    res = EvalResult(status="error", score=float("inf"), metrics={"m": float("nan")}, error="boom \ud800",
                     artifacts={"stderr": "tail \ud800\x00", "huge": "1e308"}, runtime_s=float("inf"))
    ro = Rollout(prompt="p\ud800", completion="c\udfff", run_id=rid, program_id=child.id, reward=float("nan"),
                 prompt_tokens=2**70, completion_tokens=-(2**70))
    store.write(run_id=rid, programs=[seed, child], rollouts=[ro],
                evaluations=[EvaluationRecord(seed.id, EvalResult(score=1.0), "local", "local:w0"),
                             EvaluationRecord(child.id, res, "local", "local:w1")],
                edges=[EdgeRecord(seed.id, child.id, "inspiration")])
    back = store.get_evaluation(child.id)
    assert back.score is None and back.metrics == {"m": None} and back.error == "boom \ufffd"
    assert back.artifacts["stderr"] == "tail \ud800\x00"  # JSON keeps the exact string
    assert store.get_program(seed.id).code == "x = 1  # \ufffd\n"
    assert store.get_program(child.id).metadata == {"r": "\udc80"}
    (_, r), = store.rollouts(rid)
    assert r.reward is None and r.prompt == "p\ufffd" and r.prompt_tokens == 2**31 - 1
    store.write(rewards=[RewardRecord(ro.id, 0.5, [1.0, 0.0], "k")])
    (_, r), = store.rollouts(rid)
    assert (r.reward, r.reward_vector, r.cluster_key) == (0.5, [1.0, 0.0], "k")
    workers = [w for (w,) in store.execute("SELECT worker FROM evaluations ORDER BY id")]
    assert workers == ["local:w0", "local:w1"]


def test_run_counts_start_the_ledger(store: LineageStore) -> None:
    rid = store.create_run(name="c")
    seed = Program(code="s\n", run_id=rid)
    kids = [Program(code=f"k{i}\n", run_id=rid, parent_ids=(seed.id,), operator="ast") for i in range(4)]
    store.write(programs=[seed, *kids], evaluations=[
        (seed.id, EvalResult(score=1.0)), (kids[0].id, EvalResult(score=3.0)),
        (kids[1].id, EvalResult(status="timeout")), (kids[2].id, EvalResult(score=2.0))])
    store.write(evaluations=[(kids[0].id, EvalResult(status="error"))])  # the latest row wins
    c = store.run_counts(rid)
    assert (c.children, c.children_evaluated, c.seed_score) == (4, 3, 1.0)
    assert c.by_status == {"ok": 2, "error": 1, "timeout": 1}
    assert (c.best_score, c.best_id) == (2.0, kids[2].id)


def test_schema_v1_database_is_migrated_on_open(tmp_path: Path) -> None:
    db = tmp_path / "v1.sqlite"
    st = LineageStore(db, create=True)
    rid = st.create_run(name="old")
    p = Program(code="a\n", run_id=rid)
    st.write(programs=[p], evaluations=[(p.id, EvalResult(score=1.0))])
    st.close()
    con = sqlite3.connect(db)  # make it look like a v1 file
    con.execute("ALTER TABLE evaluations DROP COLUMN worker")
    con.execute("DROP TABLE run_leases")
    con.execute("DELETE FROM qdevolve_schema")
    con.execute("INSERT INTO qdevolve_schema VALUES (1, 'old', 0)")
    con.commit()
    con.close()
    st = LineageStore(db, create=False)
    assert st.get_evaluation(p.id).score == 1.0
    st.add_evaluation(p.id, EvalResult(score=2.0), "local", "local:t")
    assert [tuple(r) for r in st.execute("SELECT worker FROM evaluations ORDER BY id")] == [(None,), ("local:t",)]
    assert st.execute("SELECT MAX(version) FROM qdevolve_schema")[0][0] == S.SCHEMA_VERSION
    with st.lease(rid):
        pass
    st.close()


def test_lease_refuses_a_live_holder_and_takes_over_a_stale_one(tmp_path: Path) -> None:
    st = LineageStore(tmp_path / "l.sqlite", create=True)
    rid = st.create_run(name="l")
    first = st.lease(rid, heartbeat_s=60).acquire()
    with pytest.raises(RunLocked, match=rf"run {rid[:12]} is being written by pid \d+"):
        st.lease(rid).acquire()
    with st._begin() as c:
        c.execute(S.run_leases.update().values(heartbeat_at=time.time() - 3600))
    second = st.lease(rid).acquire()  # stale: taken over
    second.release()
    first.release()  # releasing a lease another took over deletes nothing of theirs
    st.close()
