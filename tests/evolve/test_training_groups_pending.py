"""The trainer's groups: a group is trained once, whole, and never before its plan's members are stored.

Children of one plan are stored one ``tell`` at a time, interleaved with other plans'
children; ``GroupCollector.complete`` used to train any group with two stored members, so
late members formed a group of one and were never trained.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from qdevolve.db.store import LineageStore
from qdevolve.evolve.training.training_groups import GroupCollector
from qdevolve.types import Rollout

SETTINGS = SimpleNamespace(outcome="text", correct_threshold=1.0)
OBJECTIVE = SimpleNamespace(requires=())


@pytest.fixture
def store(tmp_path: Path) -> LineageStore:
    return LineageStore(tmp_path / "runs.db")


def _put(store: LineageStore, run: str, group: str, i: int, n: int | None, *, reward: float | None = 0.5) -> str:
    text = f"{group}{i}"
    meta = {} if n is None else {"group_n": n}
    store.write(rollouts=[Rollout(prompt="p", completion=text, run_id=run, token_ids=[1, 2], logprobs=[-1.0, -1.0],
                                  prompt_token_ids=[3], group_id=group, reward=reward, reward_vector=[reward or 0.0],
                                  metadata=meta)])
    return text


def _step(col: GroupCollector) -> list[list[str]]:
    """One trainer step: the groups' completions; the watermark moves on as the listener does."""
    groups, last = col.complete()
    col.advance(last)
    return [sorted(g.outcome_keys) for g in groups]


def test_interleaved_groups_trained_whole_and_once(store: LineageStore) -> None:
    run = store.create_run()
    col = GroupCollector(store, run, SETTINGS, OBJECTIVE)
    order = ["A", "B", "A", "C", "B", "A", "C", "B", "A", "C", "C", "B"]  # 4 members each
    counts: dict[str, int] = {}
    trained: list[list[str]] = []
    for g in order:
        counts[g] = counts.get(g, 0) + 1
        _put(store, run, g, counts[g], 4)
        for members in _step(col):
            assert len(members) == 4, f"group trained before all its members were stored: {members}"
            trained.append(members)
    keys = [k for members in trained for k in members]
    assert sorted(keys) == sorted(f"{g}{i}" for g in "ABC" for i in range(1, 5)), "every member once"
    assert len(trained) == 3


def test_later_group_trained_while_earlier_pending_not_again(store: LineageStore) -> None:
    run = store.create_run()
    col = GroupCollector(store, run, SETTINGS, OBJECTIVE)
    _put(store, run, "A", 1, 3)
    _put(store, run, "B", 1, 2)
    _put(store, run, "B", 2, 2)
    assert _step(col) == [["B1", "B2"]]
    assert col.last_seq == 0, "A holds the watermark below its first rollout"
    assert _step(col) == [], "B is not trained again"
    _put(store, run, "A", 2, 3)
    assert _step(col) == []
    _put(store, run, "A", 3, 3)
    assert _step(col) == [["A1", "A2", "A3"]]
    assert col.last_seq == 5 and col.done == set()


def test_resume_from_persisted_state_trains_nothing_twice(store: LineageStore) -> None:
    run = store.create_run()
    col = GroupCollector(store, run, SETTINGS, OBJECTIVE)
    _put(store, run, "A", 1, 2)
    _put(store, run, "B", 1, 2)
    _put(store, run, "B", 2, 2)
    groups, last = col.complete()
    state = col.state(last)  # what the listener saves with the policy version
    assert [sorted(g.outcome_keys) for g in groups] == [["B1", "B2"]]
    assert state == {"last_seq": 0, "done": ["B"]}
    resumed = GroupCollector(store, run, SETTINGS, OBJECTIVE, last_seq=state["last_seq"], done=state["done"])
    _put(store, run, "A", 2, 2)
    assert _step(resumed) == [["A1", "A2"]]
    assert _step(resumed) == []


def test_stale_incomplete_group_released_after_k_later_groups(store: LineageStore) -> None:
    run = store.create_run()
    col = GroupCollector(store, run, SETTINGS, OBJECTIVE, stale_after=3)
    _put(store, run, "A", 1, 4)  # its plan was killed in flight: A3, A4 never come
    _put(store, run, "A", 2, 4)
    _put(store, run, "Z", 1, 4)  # a killed plan with one stored member: skipped on release
    for k, g in enumerate("BC"):
        _put(store, run, g, 1, 1 + 1)
        _put(store, run, g, 2, 2)
        assert _step(col) == [[f"{g}1", f"{g}2"]], f"after {k + 1} later groups A still waits"
        assert col.last_seq == 0
    _put(store, run, "D", 1, 2)
    _put(store, run, "D", 2, 2)
    assert _step(col) == [["A1", "A2"], ["D1", "D2"]], "the third later group releases A; Z is skipped"
    assert col.last_seq == 9 and col.done == set()
    assert _step(col) == []


def test_pending_unrewarded_group_does_not_retrain_later_groups(store: LineageStore) -> None:
    run = store.create_run()
    col = GroupCollector(store, run, SETTINGS, OBJECTIVE)
    first = _put(store, run, "A", 1, None, reward=None)  # a pre-v2 rollout, rewarded later
    _put(store, run, "A", 2, None, reward=None)
    _put(store, run, "B", 1, None)
    _put(store, run, "B", 2, None)
    assert _step(col) == [["B1", "B2"]]
    assert _step(col) == [], "B is not trained again while A waits for its rewards"
    ids = [r.id for _, r in store.rollouts(run) if r.completion in (first, "A2")]
    store.set_rollout_rewards([(i, 1.0, [1.0], None) for i in ids])
    assert _step(col) == [["A1", "A2"]]
    assert col.last_seq == 4


def test_rollouts_without_group_n_keep_todays_rule(store: LineageStore) -> None:
    run = store.create_run()
    col = GroupCollector(store, run, SETTINGS, OBJECTIVE)
    _put(store, run, "A", 1, None)
    _put(store, run, "A", 2, None)
    assert _step(col) == [["A1", "A2"]]
    assert col.last_seq == 2


def test_stale_after_validated(store: LineageStore) -> None:
    with pytest.raises(ValueError, match="stale_after"):
        GroupCollector(store, "r", SETTINGS, OBJECTIVE, stale_after=0)
