"""The joined listener's reward: binary mode, ThetaEvolve-style shaping and strategy keys.

The listener is built on a real SQLite lineage store with its real reward path
(:meth:`JoinedListener.reward`); only the policy/trainer, which the reward never touches,
is left out, so these tests need no torch and run in milliseconds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import qdevolve.cluster.archive_cell  # noqa: F401
import qdevolve.cluster.ast_hash  # noqa: F401  (registers the clusterers used below)
import qdevolve.cluster.feature_cell  # noqa: F401
from qdevolve import registry
from qdevolve.db.store import LineageStore
from qdevolve.errors import ConfigError
from qdevolve.evolve.training import REWARDS, JoinedListener, TrainSettings
from qdevolve.rl.shaping import RewardShaping
from qdevolve.types import ArchiveEvent, EvalResult, Program


def _listener(tmp_path: Path, **train: object) -> tuple[JoinedListener, LineageStore, str, Program]:
    store = LineageStore(tmp_path / "run.db")
    run_id = store.create_run(name="t")
    parent = Program(code="def f(x):\n    return x + 1\n", run_id=run_id)
    store.add_program(parent, EvalResult(status="ok", score=0.5))
    lis = object.__new__(JoinedListener)  # the reward path only: no policy, trainer or backend
    lis.settings = TrainSettings.from_dict(dict(train))
    lis.store, lis.run_id, lis.n_tests = store, run_id, 1
    lis.clusterer = registry.cluster.create(lis.settings.cluster)
    lis.shaping = RewardShaping.from_dict(lis.settings.shaping)
    lis.solved, lis._solved_pending = set(), {}
    return lis, store, run_id, parent


def _child(run_id: str, parent: Program, code: str, **meta: object) -> Program:
    return Program(code=code, run_id=run_id, parent_ids=(parent.id,), operator="policy", metadata=dict(meta))


def test_binary_reward_thresholds_the_score(tmp_path: Path) -> None:
    assert "binary" in REWARDS
    lis, _, run_id, parent = _listener(tmp_path, reward="binary", correct_threshold=0.9)
    child = _child(run_id, parent, "def f(x):\n    return 2 * x\n")
    assert lis.reward(child, EvalResult(status="ok", score=0.95), [], None).reward == 1.0
    assert lis.reward(child, EvalResult(status="ok", score=0.9), [], None).reward == 1.0  # >= threshold
    assert lis.reward(child, EvalResult(status="ok", score=0.4), [], None).reward == 0.0
    assert lis.reward(child, EvalResult(status="error", error="boom"), [], None).reward == 0.0  # invalid_reward


def test_shaping_replaces_reward_by_child_kind(tmp_path: Path) -> None:
    lis, store, run_id, parent = _listener(tmp_path, shaping={"preset": "thetaevolve", "duplicate": -0.05})
    ok = EvalResult(status="ok", score=0.7)
    new = _child(run_id, parent, "def f(x):\n    return x * x\n")
    assert lis.reward(new, ok, [], None).reward == 0.7  # kind ok: the score unchanged
    lazy = _child(run_id, parent, "def f(x):\n    return x + 1\n")  # the parent's code
    assert lis.reward(lazy, ok, [], None).reward == -0.3
    other = Program(code="def f(x):\n    return x - 3\n", run_id=run_id)
    store.add_program(other, EvalResult(status="ok", score=0.1))
    dup = _child(run_id, parent, "def f(x):\n    return x - 3\n")  # stored before, not its parent
    assert lis.reward(dup, ok, [], None).reward == -0.05
    store.add_program(new, ok)  # the child itself stored (e.g. resumed): not a duplicate of itself
    assert lis.reward(new, ok, [], None).reward == 0.7
    err = _child(run_id, parent, "def f(x):\n    return 1 / 0\n")
    assert lis.reward(err, EvalResult(status="error", error="ZeroDivisionError"), [], None).reward == -0.2
    failed = _child(run_id, parent, parent.code, failed_mutation=True)
    res = lis.reward(failed, EvalResult(status="invalid", error="no code"), [], None)
    assert res.reward == -0.4 and res.vector == [-0.4]


def test_shaping_is_off_by_default_and_checked(tmp_path: Path) -> None:
    lis, _, run_id, parent = _listener(tmp_path)
    lazy = _child(run_id, parent, parent.code)
    assert lis.reward(lazy, EvalResult(status="ok", score=0.5), [], None).reward == 0.5
    with pytest.raises(ConfigError, match=r"train\.shaping: unknown key"):
        TrainSettings.from_dict({"shaping": {"lazzy": -1}})


def test_cluster_key_of_rejected_child_is_its_strategy(tmp_path: Path) -> None:
    lis, _, run_id, parent = _listener(tmp_path, cluster="feature_cell")
    a = _child(run_id, parent, "def f(x):\n    return x * x\n")
    b = _child(run_id, parent, "def f(x):\n    return x * x * x\n")
    ra = EvalResult(status="ok", score=0.2, features={"length": 5, "multiplications": 1})
    rb = EvalResult(status="ok", score=0.2, features={"length": 7, "multiplications": 2})
    # neither is admitted (no archive event): each keeps its own cell, not a shared cell:none
    ka, kb = lis.reward(a, ra, [], None).cluster_key, lis.reward(b, rb, [], None).cluster_key
    assert ka == "feat:length=5,multiplications=1" and kb == "feat:length=7,multiplications=2"
    lis2, _, run2, parent2 = _listener(tmp_path / "ast", cluster="ast_hash")
    c1 = _child(run2, parent2, "def f(y):\n    return y * y\n")
    c2 = _child(run2, parent2, "def f(z):\n    return z * z\n")
    k1, k2 = (lis2.reward(c, EvalResult(status="ok", score=0.1), [], None).cluster_key for c in (c1, c2))
    assert k1 == k2 and k1.startswith("astn:")
    # the default archive_cell key still lumps non-admitted children together, admitted ones by cell
    lis3, _, run3, parent3 = _listener(tmp_path / "cell")
    assert lis3.reward(a, ra, [], None).cluster_key == "cell:none"
    ev = ArchiveEvent(program_id=a.id, kind="added", archive="map_elites", cell="5,1", score=0.2)
    assert lis3.reward(a, ra, [ev], None).cluster_key == "cell:5,1"
