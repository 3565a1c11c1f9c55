"""Advantage objectives: the registry contract every objective meets, and RolloutGroup.

Every expected value is derived in the test from the objective's formula (docs/objectives.md)
with explicit arithmetic, never by calling the implementation.
"""

from __future__ import annotations

import numpy as np
import pytest

import qdevolve.rl.objectives.entropic  # noqa: F401  (registers it before the entry point is installed)
from qdevolve import registry
from qdevolve.errors import PluginError
from qdevolve.rl import RolloutGroup
from qdevolve.types import Rollout

TOL = 1e-9
EPS = 1e-4  # TRL's std epsilon

ADVANTAGE_OBJECTIVES = {
    "grpo": "GRPO",
    "dr_grpo": "DrGRPO",
    "reinforce_rej": "ReinforceRej",
    "raft": "RAFT",
    "ips": "IPS",
    "rare": "Rare",
    "passk": "PassAtK",
    "lad": "LAD",
    "vpo": "VPO",
    "entropic": "Entropic",
}


def make(name: str, **kwargs):
    return registry.objective.create({"type": name, **kwargs})


def full_group(rewards, **extra) -> RolloutGroup:
    """A group carrying every optional field, so any objective accepts it."""
    g = len(rewards)
    extra.setdefault("outcome_keys", [f"o{i}" for i in range(g)])
    extra.setdefault("cluster_keys", [f"c{i}" for i in range(g)])
    extra.setdefault(
        "candidate_vectors", np.repeat(np.asarray(rewards, float)[:, None, None], 3, axis=1)
    )
    return RolloutGroup(rewards=rewards, **extra)


# -- registry contract ------------------------------------------------------------------


@pytest.mark.parametrize("name,cls", sorted(ADVANTAGE_OBJECTIVES.items()))
def test_created_through_registry_with_declared_class(name, cls):
    obj = make(name)
    assert type(obj).__name__ == cls
    assert type(obj).__module__ == f"qdevolve.rl.objectives.{name}"
    assert obj.name == name
    adv = obj.advantages(full_group([1.0, 0.0, 1.0, 1.0]))
    assert isinstance(adv, np.ndarray) and adv.dtype == np.float64 and adv.shape == (4,)


@pytest.mark.parametrize("name", sorted(ADVANTAGE_OBJECTIVES))
def test_unknown_option_is_an_error(name):
    with pytest.raises(PluginError, match="unknown option"):
        make(name, not_an_option=1)


@pytest.mark.parametrize("name", sorted(ADVANTAGE_OBJECTIVES))
def test_all_equal_rewards_give_zeros(name):
    # RAFT reinforces an all-correct group by design; its all-wrong group is zero.
    value = 0.0 if name == "raft" else 1.0
    adv = make(name).advantages(
        full_group([value] * 5, outcome_keys=["a"] * 5, cluster_keys=["s"] * 5)
    )
    assert np.array_equal(adv, np.zeros(5))


@pytest.mark.parametrize("name", sorted(ADVANTAGE_OBJECTIVES))
def test_group_of_one_gives_zero(name):
    kwargs = {"k": 1} if name == "passk" else {}
    reward = 0.0 if name == "raft" else 1.0
    adv = make(name, **kwargs).advantages(full_group([reward]))
    assert np.array_equal(adv, np.zeros(1))


def test_objectives_package_imports_no_plugin_module():
    import subprocess
    import sys

    code = (
        "import sys, qdevolve.rl.objectives, qdevolve.rl;"
        "mods=[m for m in sys.modules if m.startswith('qdevolve.rl.objectives.')];"
        "print(mods, 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[] False"


# -- RolloutGroup -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"rewards": []}, "empty"),
        ({"rewards": [[1.0, 0.0]]}, "1 dimension"),
        ({"rewards": [1.0, float("nan")]}, "NaN"),
        ({"rewards": [1.0, 0.0], "reward_vectors": [[1.0, 0.0]]}, "reward_vectors has 1 rows"),
        ({"rewards": [1.0, 0.0], "reward_vectors": [1.0, 0.0]}, "2 dimension"),
        ({"rewards": [1.0, 0.0], "outcome_keys": ["a"]}, "outcome_keys has 1 keys"),
        ({"rewards": [1.0, 0.0], "cluster_keys": "ab"}, "single string"),
        ({"rewards": [1.0, 0.0], "cluster_keys": ["a", None]}, r"cluster_keys\[1\] is None"),
        ({"rewards": [1.0, 0.0], "candidate_vectors": np.zeros((3, 2, 2))}, "first dimension 3"),
        ({"rewards": [1.0, 0.0], "old_logprobs": [[0.0]]}, "old_logprobs has 1 entries"),
    ],
)
def test_group_rejects_bad_shapes(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RolloutGroup(**kwargs)


def test_group_from_rollouts():
    rs = [
        Rollout(
            prompt="p",
            completion=c,
            reward=r,
            reward_vector=v,
            group_id="g1",
            token_ids=[1, 2],
            logprobs=[-0.1, -0.2],
            metadata={"outcome_key": c},
        )
        for c, r, v in [("a", 1.0, [1, 0]), ("b", 0.0, [0, 0]), ("a", 1.0, [1, 1])]
    ]
    g = RolloutGroup.from_rollouts(rs, cluster=lambda r: r.completion.upper())
    assert g.size == 3 and g.prompt_id == "g1" and g.prompt == "p"
    assert g.rewards.tolist() == [1.0, 0.0, 1.0]
    assert g.reward_vectors.shape == (3, 2)
    assert g.outcome_keys == ("a", "b", "a") and g.cluster_keys == ("A", "B", "A")
    assert g.old_logprobs[2] == [-0.1, -0.2]
    rs[1].reward = None
    with pytest.raises(ValueError, match="has no reward"):
        RolloutGroup.from_rollouts(rs)
    assert RolloutGroup.from_rollouts(rs, missing_reward=0.0).rewards.tolist() == [1.0, 0.0, 1.0]
