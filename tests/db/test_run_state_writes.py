"""Run-state keys are written one way: an upsert, never a delete followed by an insert (which
two writers can race through on PostgreSQL). Every write path is checked: ``set_state``,
``write(state=...)``, a policy version's state and pool migration."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import event

from qdevolve.db.store import LineageStore


@pytest.fixture
def statements(store: LineageStore) -> Iterator[list[str]]:
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(" ".join(statement.split()).upper())

    event.listen(store.engine, "before_cursor_execute", record)
    yield seen
    event.remove(store.engine, "before_cursor_execute", record)


def _deletes_state(seen: list[str]) -> list[str]:
    return [s for s in seen if s.startswith("DELETE FROM RUN_STATE")]


def test_every_state_write_is_an_upsert(store: LineageStore, statements: list[str]) -> None:
    run = store.create_run(name="r", config={}, example_dir="x")
    for value in (1, 2):
        store.set_state(run, "k", value)
        store.write(run_id=run, state={"w": value})
        store.add_policy_version(run, value, objective="grpo", state={"trainer": {"step": value}})
    store.publish_migrants("pool:p", run, {"abc": {"score": 1.0}}, {"sent": 1})
    store.publish_migrants("pool:p", run, {"abc": {"score": 2.0}}, {"sent": 2})
    assert not _deletes_state(statements), _deletes_state(statements)
    assert store.get_state(run, "k") == 2 and store.get_state(run, "w") == 2
    assert store.get_state(run, "trainer") == {"step": 2} and store.get_state(run, "migration") == {"sent": 2}


def test_other_dialects_update_then_insert(store: LineageStore, statements: list[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A dialect without ``ON CONFLICT`` (not SQLite, not PostgreSQL) updates the key, or inserts
    it when there is none; it never deletes."""
    run = store.create_run(name="r", config={}, example_dir="x")
    monkeypatch.setattr(store.engine.dialect, "name", "other")
    store.set_state(run, "k", "first")
    store.set_state(run, "k", "second")
    store.add_policy_version(run, 1, state={"k": "third"})
    assert not _deletes_state(statements), _deletes_state(statements)
    assert not any("ON CONFLICT" in s for s in statements if "RUN_STATE" in s)
    assert store.get_state(run, "k") == "third"
