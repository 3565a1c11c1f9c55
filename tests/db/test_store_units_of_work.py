"""The store methods that make a run's writes units of work, and its named reads.

* ``start_run`` writes the run row, plugin files, budget counter and the seed batches in one
  transaction: a batch that fails leaves no run at all, and an existing run id is refused.
* ``open_run`` sets the status, state and budget counter (reconciled) in one transaction.
* ``take_migrant`` writes the claim with the taker's events and state, or nothing at all.
* The named reads (``status_counts``, ``event_kind_counts``, ``count_evaluations_after``,
  ``evaluations_by_worker``, ``latest_worker``, ``programs_per_policy``) count what is stored.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from qdevolve.db import sqlite_run_count
from qdevolve.db.records import EvaluationRecord
from qdevolve.db.store import LineageStore
from qdevolve.errors import DatabaseError
from qdevolve.types import ArchiveEvent, EvalResult, Program, new_id


def _seed(run_id: str) -> tuple[Program, EvalResult, ArchiveEvent]:
    p = Program(code="A = 1\n", run_id=run_id, operator="seed")
    return p, EvalResult(status="ok", score=1.0), ArchiveEvent(p.id, "added", "map_elites", run_id=run_id)


def _batch(run_id: str) -> dict:
    p, r, ev = _seed(run_id)
    return {"run_id": run_id, "programs": [p], "evaluations": [EvaluationRecord(p.id, r, "local", "w0")],
            "events": [ev], "state": {"rng": {"s": 1}, "counters": {"next_iteration": 0}}}


def _rows(store: LineageStore, run_id: str) -> tuple[int, int, int, int]:
    return (len(store.list_runs()), store.count_programs(run_id), store.count_evaluations(run_id),
            len(store.plugin_files(run_id)))


def test_start_run_writes_everything_or_nothing(store: LineageStore) -> None:
    rid = new_id()
    store.start_run(rid, name="r", config={"x": 1}, seed=3, plugin_files=[("/p.py", "ab" * 32, [("archive", "z")])],
                    budget=(rid, 0), batches=[_batch(rid)])
    assert _rows(store, rid) == (1, 1, 1, 1)
    assert store.get_state(rid, "rng") == {"s": 1} and store.budget_stored(rid) == 0
    assert store.get_run(rid)["status"] == "running"
    with pytest.raises(DatabaseError, match="exists already"):
        store.start_run(rid, batches=[_batch(rid)])
    assert _rows(store, rid) == (1, 1, 1, 1)

    other = new_id()
    bad = _batch(other)
    bad["budget"] = ("no-such-counter", 1, 10)  # the claim fails inside the transaction
    with pytest.raises(DatabaseError):
        store.start_run(other, plugin_files=[("/q.py", "cd" * 32, [])], budget=(other, 0), batches=[bad])
    assert _rows(store, other)[1:] == (0, 0, 0) and len(store.list_runs()) == 1
    assert store.budget_stored(other) is None and store.get_state(other, "rng") is None


def test_open_run_sets_status_state_and_reconciles_the_counter(store: LineageStore) -> None:
    rid = new_id()
    store.start_run(rid, budget=(rid, 0), batches=[_batch(rid)])
    child = Program(code="A = 2\n", run_id=rid, operator="diff", parent_ids=(store.iter_programs(rid).__next__()[1].id,))
    store.write(programs=[child], evaluations=[EvaluationRecord(child.id, EvalResult(status="ok", score=2.0))])
    store.update_run(rid, status="stopped")
    with pytest.warns(UserWarning, match="counter reset"):  # the child was stored without a claim
        store.open_run(rid, state={"budget": 7}, budget=(rid, 0), reconcile=True)
    assert store.get_run(rid)["status"] == "running"
    assert store.get_state(rid, "budget") == 7 and store.budget_stored(rid) == 1


def test_take_migrant_writes_the_claim_with_its_delivery_or_nothing(store: LineageStore) -> None:
    a, b = new_id(), new_id()
    for rid in (a, b):
        store.start_run(rid, batches=[_batch(rid)])
    pid = next(iter(store.iter_programs(a)))[1].id
    ev = ArchiveEvent(pid, "migrated", "map_elites", run_id=b, data={"from_run": a})
    assert store.take_migrant("pool:p", pid, b, run_id=b, events=[ev], state={"migration": {"received": [pid]}})
    assert store.pool_migrants("pool:p")[1] == {pid: b}
    assert [e.kind for e in store.archive_events(b)] == ["added", "migrated"]
    other = new_id()
    ev2 = ArchiveEvent(pid, "migrated", "map_elites", run_id=other)
    assert not store.take_migrant("pool:p", pid, other, run_id=other, events=[ev2],
                                  state={"migration": {"received": [pid]}})
    assert store.archive_events(other) == [] and store.get_state(other, "migration") is None
    assert store.take_migrant("pool:p", pid, b, run_id=b)  # our own claim stays ours


def test_named_reads_count_what_is_stored(store: LineageStore) -> None:
    rid = new_id()
    store.start_run(rid, batches=[_batch(rid)])
    seed_id = next(iter(store.iter_programs(rid)))[1].id
    kids = [Program(code=f"A = {i + 2}\n", run_id=rid, operator="diff", parent_ids=(seed_id,),
                    policy_version=i % 2 if i < 3 else None) for i in range(4)]
    statuses = ["ok", "error", "ok", "timeout"]
    store.write(programs=kids, evaluations=[EvaluationRecord(k.id, EvalResult(status=s, score=1.0 if s == "ok" else None),
                                                             "local", f"w{i % 2}") for i, (k, s) in
                                            enumerate(zip(kids, statuses, strict=True))],
                events=[ArchiveEvent(kids[0].id, "improved", "map_elites", run_id=rid)])
    assert store.status_counts(rid) == {"ok": 3, "error": 1, "timeout": 1}
    assert store.status_counts(rid, up_to_eval=0) == {} and store.status_counts(rid, up_to_eval=1) == {"ok": 1}
    assert store.count_evaluations_after(rid, 0) == 5
    assert store.event_kind_counts(rid) == {"added": 1, "improved": 1}
    assert store.event_kind_counts(rid, up_to_event=1) == {"added": 1}
    assert store.evaluations_by_worker(rid) == {"w0": 3, "w1": 2}
    assert store.latest_worker(kids[1].id) == "w1" and store.latest_worker("nope") is None
    assert store.programs_per_policy(rid) == {0: 2, 1: 1}


def test_sqlite_run_count(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    with LineageStore(db, create=True) as st:
        assert sqlite_run_count(db) == 0
        rid = new_id()
        st.start_run(rid, batches=[_batch(rid)])
    assert sqlite_run_count(db) == 1
    (tmp_path / "x.sqlite").write_text("not a database")
    assert sqlite_run_count(tmp_path / "x.sqlite") is None
