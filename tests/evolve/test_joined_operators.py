"""A train section keeps the model operators the config names: every model call is a rollout.

The joined run used to replace the config's operators with the ``policy`` operator, so a
model example (``block`` prompts in chat form) could not be trained in the loop at all."""

from __future__ import annotations

from pathlib import Path

from qdevolve.evolve.setup.example import load_example
from qdevolve.evolve.training import apply_policy_options

ROOT = Path(__file__).resolve().parents[2]


def test_model_operators_are_kept_and_sample_the_trained_policy():
    ex = load_example(ROOT / "examples" / "small_model_knapsack")
    cfg = ex.config.with_overrides(train={"policy": "tiny", "objective": {"type": "grpo"}})
    out = apply_policy_options(cfg, policy=None, objective=None, every=None)
    assert [m["type"] for m in out.mutation] == ["block"]
    assert out.backend == {"type": "transformers", "policy": "tiny"}  # the trained policy serves them


def test_a_config_without_model_operators_gets_the_policy_operator():
    ex = load_example(ROOT / "examples" / "small_model_knapsack")
    cfg = ex.config.with_overrides(mutation=[{"type": "ast"}], train={"policy": "tiny"})
    out = apply_policy_options(cfg, policy=None, objective=None, every=None)
    assert [m["type"] for m in out.mutation] == ["policy"]


def test_a_trained_run_with_many_plans_in_flight_is_warned():
    from qdevolve.evolve.setup.validate import training_pending_warnings

    ex = load_example(ROOT / "examples" / "small_model_knapsack")  # max_pending 16 for batching
    cfg = ex.config.with_overrides(children_per_parent=4, train={"policy": "tiny", "every": 8})
    (warning,) = training_pending_warnings(cfg)
    assert "run.max_pending 16" in warning and "keeps 2" in warning
    assert training_pending_warnings(ex.config) == []  # no training: batching is all that matters
    off = ex.config.with_overrides(train={"policy": "tiny", "enabled": False})
    assert training_pending_warnings(off) == []
