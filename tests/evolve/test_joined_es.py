"""GroupES (ES inside the joined loop), hand-computed on a one-parameter model; the duplicate
reward and the sample budget of the joined listener on a real SQLite store."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="ES needs torch")

from qdevolve import registry  # noqa: E402
from qdevolve.rl.es import GroupES  # noqa: E402
from qdevolve.types import EvalResult, Program  # noqa: E402

from .test_joined_reward import _child, _listener  # noqa: E402


def test_group_es_update_is_alpha_over_n_sum_z_eps() -> None:
    model = torch.nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(0.5)
    es_obj = registry.objective.create({"type": "es", "population": 2, "sigma": 0.1, "alpha": 0.2, "seed": 3})
    es = GroupES(es_obj, model)
    eps = [es_obj.noise(s, 0, model.weight).item() for s in es.seeds]
    m0 = es.assign()
    with es.perturbed(m0):
        assert model.weight.item() == pytest.approx(0.5 + 0.1 * eps[0])
    assert model.weight.item() == pytest.approx(0.5, abs=1e-7)  # restored
    m1 = es.assign()
    assert (m0, m1) == (0, 1) and es.full and not es.ready
    for r in (1.0, 0.0):  # member 0's group: mean 0.5
        es.record(0, r)
    es.record(1, 0.0)  # member 1's group: mean 0
    es.finish()
    es.finish()
    assert es.ready
    stats = es.update()
    # z = (R - mean) / std = (+1, -1); theta += alpha / N * (eps_0 - eps_1)
    assert model.weight.item() == pytest.approx(0.5 + 0.2 / 2 * (eps[0] - eps[1]), abs=1e-6)
    assert stats["reward_mean"] == pytest.approx(0.25) and stats["updated"] == 1.0
    assert es.iteration == 1 and es_obj.iteration == 1 and not es.full


def test_group_es_equal_fitness_no_update() -> None:
    model = torch.nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(0.5)
    es = GroupES(registry.objective.create({"type": "es", "population": 2}), model, missing=-1.0)
    es.record(0, -1.0)  # member 1 earned nothing: it scores the 'missing' reward, equal to member 0's
    stats = es.update()
    assert stats["updated"] == 0.0 and model.weight.item() == 0.5


def test_duplicate_reward_is_the_copied_programs_reward_shaped(tmp_path: Path) -> None:
    lis, store, run_id, parent = _listener(tmp_path, shaping={"lazy": -0.3, "duplicate": -0.2}, cluster="feature_cell",
                                           max_samples=3)
    feats = {"length": 5, "multiplications": 1}
    other = Program(code="def f(x):\n    return x * 3\n", run_id=run_id)
    store.add_program(other, EvalResult(status="ok", score=0.8, tests=[1.0, 0.6], features=feats))
    copy = _child(run_id, parent, other.code)
    r = lis.duplicate_reward(copy, other, store.get_evaluation(other.id))
    assert r.reward == -0.2 and r.vector == [1.0, 0.6]
    assert r.cluster_key == "feat:length=5,multiplications=1"  # the copy's strategy is the original's cell
    assert lis.samples == 0  # a reward is counted once it is stored (count_reward, after the commit)
    lis.count_reward(copy, r)
    lazy = _child(run_id, parent, parent.code)
    r = lis.duplicate_reward(lazy, parent, store.get_evaluation(parent.id))
    assert r.reward == -0.3
    lis.count_reward(lazy, r)
    assert lis.stop_reason is None and lis.samples == 2
    child = _child(run_id, parent, "def f(x):\n    return 7\n")
    lis.count_reward(child, lis.reward(child, EvalResult(status="ok", score=0.1), [], None))
    assert lis.samples == 3 and "max_samples" in (lis.stop_reason or "")


def test_duplicate_reward_unshaped_keeps_the_copied_reward(tmp_path: Path) -> None:
    lis, store, run_id, parent = _listener(tmp_path, reward="binary", correct_threshold=0.75)
    other = Program(code="def f(x):\n    return x * 3\n", run_id=run_id)
    store.add_program(other, EvalResult(status="ok", score=0.8))
    assert lis.duplicate_reward(_child(run_id, parent, other.code), other, store.get_evaluation(other.id)).reward == 1.0
