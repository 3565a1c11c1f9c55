"""``train.shaping``'s ``no_program`` penalty reaches a failed child (a completion that gave no
program) through the training listener, the way ``lazy``/``duplicate`` reach copies; off by default."""

from __future__ import annotations

from pathlib import Path

import pytest

from qdevolve.db.store import LineageStore
from qdevolve.errors import ConfigError
from qdevolve.evolve.training import JoinedListener, TrainSettings
from qdevolve.rl.shaping import RewardShaping
from qdevolve.types import EvalResult, Program


def _listener(tmp_path: Path, shaping: dict | None) -> JoinedListener:
    lst = JoinedListener.__new__(JoinedListener)
    lst.store = LineageStore(tmp_path / "runs.db")
    lst.run_id = lst.store.create_run()
    lst.settings = TrainSettings.from_dict({"shaping": shaping, "invalid_reward": 0.0})
    lst.shaping = RewardShaping.from_dict(lst.settings.shaping)
    lst.clusterer = lambda item: "k"
    lst.n_tests, lst._solved_pending = 1, {}
    return lst


def _failed(run_id: str) -> tuple[Program, EvalResult]:
    prog = Program(code="", run_id=run_id, metadata={"failed_mutation": True, "completion": "no code here"})
    return prog, EvalResult(status="invalid", error="no code block")


@pytest.mark.parametrize("shaping, expected", [(None, 0.0), ({"no_program": -0.4}, -0.4),
                                               ({"preset": "thetaevolve"}, -0.4),
                                               ({"lazy": -0.3, "duplicate": -0.3}, 0.0)])
def test_failed_child_penalised_only_when_configured(tmp_path: Path, shaping: dict | None, expected: float) -> None:
    lst = _listener(tmp_path, shaping)
    prog, result = _failed(lst.run_id)
    got = lst.reward(prog, result, [], None)
    assert got.reward == pytest.approx(expected)
    assert got.vector == [pytest.approx(expected)]


def test_failed_child_penalty_validated() -> None:
    with pytest.raises(ConfigError, match=r"train\.shaping\.no_program: expected a number"):
        TrainSettings.from_dict({"shaping": {"no_program": "lots"}})
