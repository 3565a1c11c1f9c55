"""The suite's design options in the joined listener: the clipped improvement reward and the
``same_class`` penalty (a child in the semantic class of any stored program of its problem).

Built on a real SQLite lineage store with the listener's real reward path and the real
``semantic`` clusterer; the policy and trainer, which the reward never touches, are left out.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import qdevolve.cluster.semantic  # noqa: F401  (registers the clusterer)
from qdevolve import registry
from qdevolve.db.store import LineageStore
from qdevolve.errors import ConfigError
from qdevolve.evolve.training import JoinedListener, TrainSettings
from qdevolve.evolve.training.listener import Reward
from qdevolve.rl.shaping import RewardShaping, clipped_improvement
from qdevolve.types import EvalResult, Program


def _listener(store: LineageStore, run_id: str, **train: object) -> JoinedListener:
    lis = object.__new__(JoinedListener)  # the reward path only: no policy, trainer or backend
    lis.settings = TrainSettings.from_dict({"cluster": {"type": "semantic"}, "solved_by": "target", **train})
    lis.store, lis.run_id, lis.n_tests = store, run_id, 1
    lis.clusterer = registry.cluster.create(lis.settings.cluster)
    lis.shaping = RewardShaping.from_dict(lis.settings.shaping)
    lis.solved, lis._solved_pending, lis._class_pending, lis._classes = set(), {}, {}, None
    lis.samples, lis.stop_reason, lis.es = 0, None, None
    return lis


def _res(score: float, outputs: list[int], target: float = 0.0) -> EvalResult:
    return EvalResult(status="ok", score=score, tests=[score], features={"target": target},
                      artifacts={"outputs": outputs})


def _store(tmp_path: Path) -> tuple[LineageStore, str, Program]:
    store = LineageStore(tmp_path / "run.sqlite")
    run_id = store.create_run(name="t")
    seed = Program(code='EXPR = "x"\n', run_id=run_id, operator="seed")
    store.add_program(seed, _res(0.5, [0, 1, 2]))
    return store, run_id, seed


def _child(run_id: str, parent: Program, expr: str) -> Program:
    return Program(code=f'EXPR = "{expr}"\n', run_id=run_id, parent_ids=(parent.id,), operator="policy")


def test_clipped_improvement_formula():
    assert clipped_improvement(1.0, 0.5) == 0.5
    assert clipped_improvement(0.5, 0.5) == 0.0      # a second half-solution from a half-solved parent
    assert clipped_improvement(0.0, 0.5) == 0.0      # worse: clipped at 0, not negative
    assert clipped_improvement(1.0, None) == 1.0     # no parent score: from 0
    assert clipped_improvement(0.9, 0.0, clip=0.5) == 1.0  # capped at c, then / c
    assert clipped_improvement(0.2, 0.0, clip=0.5) == pytest.approx(0.4)
    with pytest.raises(ValueError, match="clip"):
        clipped_improvement(1.0, 0.0, clip=0.0)


def test_listener_pays_only_improvement_over_the_parent(tmp_path: Path):
    store, run_id, seed = _store(tmp_path)
    parent = EvalResult(status="ok", score=0.5)
    lis = _listener(store, run_id, reward="improvement_clipped")
    half = _child(run_id, seed, "x+1")
    assert lis.reward(half, _res(0.5, [1, 2, 3]), [], parent).reward == 0.0
    assert lis.reward(_child(run_id, seed, "1"), _res(1.0, [1, 1, 1]), [], parent).reward == 0.5
    assert lis.reward(_child(run_id, seed, "3"), _res(0.0, [3, 3, 3]), [], parent).reward == 0.0
    plain = _listener(store, run_id, reward="score")
    assert plain.reward(half, _res(0.5, [1, 2, 3]), [], parent).reward == 0.5  # what the change removes
    with pytest.raises(ConfigError, match="improvement_clip"):
        TrainSettings.from_dict({"reward": "improvement_clipped", "improvement_clip": 0})


def test_same_class_penalises_a_new_text_of_a_stored_behaviour(tmp_path: Path):
    store, run_id, seed = _store(tmp_path)
    other = Program(code='EXPR = "x*1"\n', run_id=run_id, parent_ids=(seed.id,), operator="policy")
    store.add_program(other, _res(0.5, [5, 6, 7]))
    lis = _listener(store, run_id, shaping={"same_class": -0.3, "lazy": -0.2})
    # the seed's class, new text: penalised; so is the class of a stored child that is not its parent
    assert lis.reward(_child(run_id, seed, "x+0"), _res(0.5, [0, 1, 2]), [], None).reward == -0.3
    assert lis.reward(_child(run_id, seed, "1*x*1"), _res(0.5, [5, 6, 7]), [], None).reward == -0.3
    # a new class keeps its score; the same outputs on another problem (target) are another class
    fresh = _child(run_id, seed, "x+x")
    r = lis.reward(fresh, _res(0.5, [0, 2, 4]), [], None)
    assert r.reward == 0.5
    assert lis.reward(_child(run_id, seed, "2*x"), _res(0.5, [0, 1, 2], target=3.0), [], None).reward == 0.5
    # the parent's own text is still 'lazy', not same_class
    assert lis.reward(_child(run_id, seed, "x"), _res(0.5, [0, 1, 2]), [], None).reward == -0.2
    # once the engine stores the fresh child, its class counts as stored
    assert lis.reward(_child(run_id, seed, "x*2"), _res(0.5, [0, 2, 4]), [], None).reward == 0.5
    lis.count_reward(fresh, r)
    assert lis.reward(_child(run_id, seed, "x*2"), _res(0.5, [0, 2, 4]), [], None).reward == -0.3


def test_same_class_is_rebuilt_from_the_store_and_off_by_default(tmp_path: Path):
    store, run_id, seed = _store(tmp_path)
    kid = _child(run_id, seed, "x+x")
    store.add_program(kid, _res(1.0, [0, 2, 4]))
    resumed = _listener(store, run_id, shaping={"same_class": -0.3})  # a new listener: the store only
    assert resumed.reward(_child(run_id, seed, "2*x"), _res(1.0, [0, 2, 4]), [], None).reward == -0.3
    plain = _listener(store, run_id, shaping={"duplicate": -0.3})
    assert plain.reward(_child(run_id, seed, "2*x"), _res(1.0, [0, 2, 4]), [], None).reward == 1.0
    # a failed child has no class: its status decides
    bad = resumed.reward(_child(run_id, seed, "(("), EvalResult(status="invalid", error="syntax"), [], None)
    assert bad.reward == 0.0
    assert isinstance(bad, Reward)
