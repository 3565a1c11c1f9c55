"""Advantage objectives on hand-computed groups.

Every expected value is derived in the test from the objective's formula (docs/objectives.md)
with explicit arithmetic, never by calling the implementation.
"""

from __future__ import annotations

import itertools
import math

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


# -- grpo -------------------------------------------------------------------------------


def test_grpo_group_scaling_by_hand():
    # r = [1, 0, 0, 1]: mean 0.5, Bessel std sqrt((4 * 0.25) / 3) = sqrt(1/3)
    std = math.sqrt(1.0 / 3.0)
    expected = np.array([0.5, -0.5, -0.5, 0.5]) / (std + EPS)
    adv = make("grpo").advantages(RolloutGroup([1.0, 0.0, 0.0, 1.0]))
    np.testing.assert_allclose(adv, expected, rtol=0, atol=TOL)


def test_grpo_graded_rewards_by_hand():
    # r = [0.2, 0.5, 0.8]: mean 0.5, deviations -0.3, 0, 0.3, Bessel var (0.09 + 0.09) / 2
    std = math.sqrt(0.09)
    expected = np.array([-0.3, 0.0, 0.3]) / (std + EPS)
    np.testing.assert_allclose(
        make("grpo").advantages(RolloutGroup([0.2, 0.5, 0.8])), expected, atol=TOL
    )


def test_grpo_no_scaling_by_hand():
    adv = make("grpo", scale="none").advantages(RolloutGroup([1.0, 0.0, 0.0, 1.0]))
    np.testing.assert_allclose(adv, [0.5, -0.5, -0.5, 0.5], atol=TOL)


def test_grpo_batch_scaling_by_hand():
    g1, g2 = RolloutGroup([1.0, 0.0, 0.0, 1.0]), RolloutGroup([1.0, 1.0, 1.0, 0.0])
    # pooled rewards [1,0,0,1,1,1,1,0]: mean 5/8; squared deviations 5 * 0.375^2 + 3 * 0.625^2
    pooled_std = math.sqrt((5 * 0.375**2 + 3 * 0.625**2) / 7)
    exp1 = np.array([0.5, -0.5, -0.5, 0.5]) / (pooled_std + EPS)
    exp2 = np.array([0.25, 0.25, 0.25, -0.75]) / (pooled_std + EPS)
    a1, a2 = make("grpo", scale="batch").advantages_batch([g1, g2])
    np.testing.assert_allclose(a1, exp1, atol=TOL)
    np.testing.assert_allclose(a2, exp2, atol=TOL)
    one_at_a_time = make("grpo", scale="batch", batch_std=pooled_std)
    np.testing.assert_allclose(one_at_a_time.advantages(g2), exp2, atol=TOL)
    with pytest.raises(ValueError, match="batch_std"):
        make("grpo", scale="batch").advantages(g1)


def test_grpo_rejects_bad_scale():
    with pytest.raises(ValueError, match="scale must be one of"):
        make("grpo", scale="token")


# -- dr_grpo, reinforce_rej, raft -----------------------------------------------------


def test_dr_grpo_by_hand():
    adv = make("dr_grpo").advantages(RolloutGroup([3.0, 1.0, 2.0]))
    np.testing.assert_allclose(adv, [1.0, -1.0, 0.0], atol=TOL)
    assert make("dr_grpo").loss_type == "dr_grpo"


def test_reinforce_rej_by_hand():
    # Xiong et al.: s = +1 correct, -1 wrong; the advantage is s itself (no baseline).
    obj = make("reinforce_rej")
    mixed = RolloutGroup([1.0, 0.0, 1.0, 1.0])
    np.testing.assert_allclose(obj.advantages(mixed), [1.0, -1.0, 1.0, 1.0], atol=TOL)
    # baseline = mean: s = [1, -1, 1, 1], mean 0.5 -> [0.5, -1.5, 0.5, 0.5]
    np.testing.assert_allclose(
        make("reinforce_rej", baseline="mean").advantages(mixed),
        [0.5, -1.5, 0.5, 0.5],
        atol=TOL,
    )
    # the earlier 0/1 reading stays available as reward="raw": [1, 0, 1, 1] - 0.75
    np.testing.assert_allclose(
        make("reinforce_rej", reward="raw", baseline="mean").advantages(mixed),
        [0.25, -0.75, 0.25, 0.25],
        atol=TOL,
    )
    for rewards in ([1.0] * 4, [0.0] * 4):
        g = RolloutGroup(rewards)
        assert obj.rejected(g)
        assert np.array_equal(obj.advantages(g), np.zeros(4))
    assert not obj.rejected(mixed)
    with pytest.raises(ValueError, match="baseline"):
        make("reinforce_rej", baseline="median")
    with pytest.raises(ValueError, match="reward must be one of"):
        make("reinforce_rej", reward="binary")


def test_reinforce_rej_partial_rewards_and_filter_by_hand():
    obj = make("reinforce_rej")
    # graded rewards below tau = 1 are all wrong: [0.5, 0.2, 0.9] -> s = [-1, -1, -1], rejected
    partial = RolloutGroup([0.5, 0.2, 0.9])
    assert obj.rejected(partial) and np.array_equal(obj.advantages(partial), np.zeros(3))
    # tau = 0.5: s = [+1, -1, +1] -> kept, A = s
    half = make("reinforce_rej", correct_threshold=0.5)
    np.testing.assert_allclose(half.advantages(partial), [1.0, -1.0, 1.0], atol=TOL)
    # raw rewards reject only zero variance: [0.5, 0.2, 0.9] is kept with A = r
    np.testing.assert_allclose(
        make("reinforce_rej", reward="raw").advantages(partial), [0.5, 0.2, 0.9], atol=TOL
    )
    # the published filter drops all-correct and all-wrong prompts from the batch
    all_right, all_wrong, mixed = (RolloutGroup(r) for r in ([1.0, 1.0], [0.0, 0.0], [0.0, 1.0]))
    assert obj.select_groups([all_right, mixed, all_wrong]) == [mixed]


def test_raft_by_hand():
    obj = make("raft")
    np.testing.assert_array_equal(obj.advantages(RolloutGroup([0.2, 0.9, 0.9, 0.5])), [0, 1, 1, 0])
    np.testing.assert_array_equal(obj.advantages(RolloutGroup([1.0, 1.0])), [1, 1])
    np.testing.assert_array_equal(obj.advantages(RolloutGroup([0.0, 0.0])), [0, 0])
    np.testing.assert_array_equal(
        make("raft", threshold=0.95).advantages(RolloutGroup([0.2, 0.9, 0.9])), [0, 0, 0]
    )


# -- ips --------------------------------------------------------------------------------


def test_ips_all_correct_group_by_hand():
    # diversity-rl.md §3 example: G=8, outcome A x6, B x2, all correct.
    # r~_A = 1 / (6/8) = 4/3, r~_B = 1 / (2/8) = 4, mean 2; deviations -2/3 (x6) and 2 (x2)
    std = math.sqrt((6 * (2 / 3) ** 2 + 2 * 2.0**2) / 7)
    expected = np.array([-2 / 3] * 6 + [2.0] * 2) / (std + EPS)
    g = RolloutGroup([1.0] * 8, outcome_keys=list("AAAAAABB"))
    np.testing.assert_allclose(make("ips").advantages(g), expected, atol=TOL)
    assert make("ips").advantages(g)[-1] > 0 > make("ips").advantages(g)[0]


def test_ips_mixed_group_floor_and_alpha_by_hand():
    g = RolloutGroup([1.0, 1.0, 0.0, 1.0], outcome_keys=["a", "a", "b", "c"])
    # p_hat = [1/2, 1/2, 1/4, 1/4]; r~ = [2, 2, 0, 4]; mean 2; deviations [0, 0, -2, 2]
    std = math.sqrt(8 / 3)
    np.testing.assert_allclose(
        make("ips").advantages(g), np.array([0, 0, -2, 2]) / (std + EPS), atol=TOL
    )
    # eps = 0.5 floors c's 1/4: r~ = [2, 2, 0, 2]; mean 1.5; deviations [.5, .5, -1.5, .5]; var 1
    np.testing.assert_allclose(
        make("ips", eps=0.5).advantages(g), np.array([0.5, 0.5, -1.5, 0.5]) / (1.0 + EPS), atol=TOL
    )
    # alpha = 0.5: r~ = [sqrt 2, sqrt 2, 0, 2]
    s = np.array([math.sqrt(2), math.sqrt(2), 0.0, 2.0])
    dev = s - s.sum() / 4
    std = math.sqrt((dev**2).sum() / 3)
    np.testing.assert_allclose(make("ips", alpha=0.5).advantages(g), dev / (std + EPS), atol=TOL)
    # alpha = 0 is GRPO
    np.testing.assert_allclose(
        make("ips", alpha=0.0).advantages(g), make("grpo").advantages(g), atol=TOL
    )


def test_ips_partial_rewards_are_thresholded_by_hand():
    # keys a a a b; rewards 1 1 1 0.4. Raw: p_hat = [3/4 x3, 1/4]; r~ = [4/3 x3, 1.6]:
    # the unique 0.4-credit text outranks the correct answer seen three times.
    g = RolloutGroup([1.0, 1.0, 1.0, 0.4], outcome_keys=list("aaab"))
    raw = np.array([4 / 3] * 3 + [1.6])
    dev = raw - raw.mean()
    std = math.sqrt((dev**2).sum() / 3)
    np.testing.assert_allclose(make("ips", reward="raw").advantages(g), dev / (std + EPS), atol=TOL)
    assert make("ips", reward="raw").advantages(g)[3] > 0
    # binary (default): b = [1, 1, 1, 0]; r~ = [4/3 x3, 0]; mean 1; deviations [1/3 x3, -1]
    std = math.sqrt((3 * (1 / 3) ** 2 + 1.0) / 3)
    expected = np.array([1 / 3] * 3 + [-1.0]) / (std + EPS)
    np.testing.assert_allclose(make("ips").advantages(g), expected, atol=TOL)
    # tau = 0.4 makes the partial answer correct: r~ = [4/3 x3, 4]; mean 2; dev [-2/3 x3, 2]
    std = math.sqrt((3 * (2 / 3) ** 2 + 4.0) / 3)
    expected = np.array([-2 / 3] * 3 + [2.0]) / (std + EPS)
    np.testing.assert_allclose(make("ips", correct_threshold=0.4).advantages(g), expected, atol=TOL)
    with pytest.raises(ValueError, match="reward must be one of"):
        make("ips", reward="sign")


def test_ips_cluster_key_and_missing_keys():
    g = RolloutGroup([1.0, 1.0, 1.0], cluster_keys=["x", "x", "y"])
    # r~ = [3/2, 3/2, 3]; mean 2; deviations [-1/2, -1/2, 1]; var (1/4 + 1/4 + 1) / 2 = 3/4
    expected = np.array([-0.5, -0.5, 1.0]) / (math.sqrt(0.75) + EPS)
    np.testing.assert_allclose(make("ips", key="cluster").advantages(g), expected, atol=TOL)
    with pytest.raises(ValueError, match="needs RolloutGroup field.*outcome_keys"):
        make("ips").advantages(g)
    with pytest.raises(ValueError, match="key must be one of"):
        make("ips", key="answer")
    with pytest.raises(ValueError, match="probability floor"):
        make("ips", eps=2.0)


# -- rare -------------------------------------------------------------------------------


def test_rare_all_counts_and_all_signs_by_hand():
    # the earlier reading: sizes over all G completions, every signed advantage weighted
    g = RolloutGroup([1.0, 1.0, 1.0, 0.0, 0.0, 1.0], cluster_keys=list("xxxyzz"))
    # GRPO: mean 2/3, deviations [1/3 x3, -2/3, -2/3, 1/3]; Bessel var (4/9 + 8/9) / 5
    std = math.sqrt((4 * (1 / 3) ** 2 + 2 * (2 / 3) ** 2) / 5)
    base = np.array([1 / 3, 1 / 3, 1 / 3, -2 / 3, -2 / 3, 1 / 3]) / (std + EPS)
    sizes = np.array([3, 3, 3, 1, 2, 2], dtype=float)
    old = {"apply_to": "all", "count": "all"}
    np.testing.assert_allclose(make("rare", **old).advantages(g), base / sizes, atol=TOL)
    np.testing.assert_allclose(
        make("rare", alpha=0.5, **old).advantages(g), base / np.sqrt(sizes), atol=TOL
    )
    positive_only = np.where(base > 0, base / sizes, base)
    np.testing.assert_allclose(
        make("rare", apply_to="positive", count="all").advantages(g), positive_only, atol=TOL
    )
    np.testing.assert_allclose(make("rare", alpha=0.0).advantages(g), base, atol=TOL)


def test_rare_counts_among_correct_by_hand():
    # Keys x x x y z z; rewards 1 1 1 0 0 1. Correct: indices 0,1,2 (x) and 5 (z).
    # Among correct: x -> 3, z -> 1 (index 4, a wrong z, no longer counts against index 5).
    g = RolloutGroup([1.0, 1.0, 1.0, 0.0, 0.0, 1.0], cluster_keys=list("xxxyzz"))
    std = math.sqrt((4 * (1 / 3) ** 2 + 2 * (2 / 3) ** 2) / 5)
    base = np.array([1 / 3, 1 / 3, 1 / 3, -2 / 3, -2 / 3, 1 / 3]) / (std + EPS)
    # default: positive advantages divided by the correct-cluster size, negatives untouched
    expected = np.array([base[0] / 3, base[1] / 3, base[2] / 3, base[3], base[4], base[5] / 1])
    np.testing.assert_allclose(make("rare").advantages(g), expected, atol=TOL)
    # total positive push per correct strategy is equal: x gets 3 x base/3, z gets 1 x base
    adv = make("rare").advantages(g)
    assert math.isclose(adv[:3].sum(), adv[5], abs_tol=TOL)
    # apply_to="all": wrong ones are counted among the wrong (y -> 1, z -> 1): unchanged here
    np.testing.assert_allclose(make("rare", apply_to="all").advantages(g), expected, atol=TOL)
    # a partial-credit reward below tau is not correct: rewards 1, 1, 0.5 keys a a a
    # GRPO: mean 5/6, deviations [1/6, 1/6, -1/3]; var (1/36 + 1/36 + 1/9) / 2 = 1/12
    g2 = RolloutGroup([1.0, 1.0, 0.5], cluster_keys=["a", "a", "a"])
    dev = np.array([1 / 6, 1 / 6, -1 / 3]) / (math.sqrt(1 / 12) + EPS)
    np.testing.assert_allclose(
        make("rare").advantages(g2), [dev[0] / 2, dev[1] / 2, dev[2]], atol=TOL
    )
    # tau = 0.5 makes all three correct: positive ones divided by 3
    np.testing.assert_allclose(
        make("rare", correct_threshold=0.5).advantages(g2), [dev[0] / 3, dev[1] / 3, dev[2]],
        atol=TOL,
    )
    with pytest.raises(ValueError, match="count must be one of"):
        make("rare", count="wrong")


def test_rare_requires_cluster_keys():
    with pytest.raises(ValueError, match="cluster_keys"):
        make("rare").advantages(RolloutGroup([1.0, 0.0]))


# -- entropic ---------------------------------------------------------------------------


def test_entropic_fixed_beta_by_hand():
    # beta = ln 3, r = [0, 1]: e = exp(beta (r - 1)) = [1/3, 1]; LOO means Z = [1, 1/3]
    # w = e / Z = [1/3, 3]; A = w - 1 = [-2/3, 2]
    obj = make("entropic", beta=math.log(3))
    np.testing.assert_allclose(obj.advantages(RolloutGroup([0.0, 1.0])), [-2 / 3, 2.0], atol=1e-9)
    # beta = ln 2, r = [0, 1, 2]: e = [1/4, 1/2, 1]; Z_i = mean of the other two
    # Z = [3/4, 5/8, 3/8]; w = [1/3, 4/5, 8/3]; A = [-2/3, -1/5, 5/3]
    obj = make("entropic", beta=math.log(2))
    np.testing.assert_allclose(
        obj.advantages(RolloutGroup([0.0, 1.0, 2.0])), [-2 / 3, -1 / 5, 5 / 3], atol=1e-9
    )
    assert obj.last_beta == math.log(2)


def test_entropic_adaptive_beta_meets_the_kl_budget():
    from qdevolve.rl.objectives.entropic import solve_beta

    # G = 4, one correct: q = [a, 1, 1, 1] / (a + 3) with a = e^beta;
    # KL(q || U) = log 4 - log(a + 3) + a log(a) / (a + 3)  (worked from the definition)
    def kl_by_hand(beta: float) -> float:
        a = math.exp(beta)
        return math.log(4) - math.log(a + 3) + a * math.log(a) / (a + 3)

    r = [1.0, 0.0, 0.0, 0.0]
    obj = make("entropic")
    adv = obj.advantages(RolloutGroup(r))
    beta = obj.last_beta
    assert math.isclose(kl_by_hand(beta), math.log(2), abs_tol=1e-9)
    a = math.exp(beta)  # about 12.9: the best answer gets a / 1 - 1, every other 1 / ((a + 2) / 3) - 1
    np.testing.assert_allclose(adv, [a - 1, 3 / (a + 2) - 1, 3 / (a + 2) - 1, 3 / (a + 2) - 1],
                               rtol=1e-6)
    # the adaptive beta makes advantages invariant to the reward's scale and offset
    np.testing.assert_allclose(make("entropic").advantages(RolloutGroup([7.0, 5.0, 5.0, 5.0])), adv,
                               rtol=1e-6)
    # half the group at the maximum: KL -> log(4/2) = ln 2 only as beta -> infinity (in floats
    # once exp(-beta) underflows against 1); the search ends at a large beta, where the winners
    # get (G-1)/(c-1) - 1 = 2 and the rest -1
    beta_half = solve_beta(np.array([1.0, 1.0, 0.0, 0.0]), beta_max=64.0)
    assert 30.0 < beta_half <= 64.0
    np.testing.assert_allclose(make("entropic", beta_max=64.0).advantages(
        RolloutGroup([1.0, 1.0, 0.0, 0.0])), [2.0, 2.0, -1.0, -1.0], atol=1e-9)
    with pytest.raises(ValueError, match="beta must be finite"):
        make("entropic", beta=0.0)
    with pytest.raises(ValueError, match="iters"):
        make("entropic", iters=0)


# -- passk ------------------------------------------------------------------------------


def _passk_brute_force(n: int, c: int, k: int) -> np.ndarray:
    """Pass@k advantages from subset enumeration instead of binomial formulas."""
    correct = set(range(c))
    subsets = list(itertools.combinations(range(n), k))
    rho = sum(1 for s in subsets if correct & set(s)) / len(subsets)
    sigma = math.sqrt(rho * (1 - rho))
    if sigma == 0:
        return np.zeros(n)
    # for an incorrect rollout i: fraction of (k-1)-subsets of the other n-1 with no correct one
    wrong = c  # index of the first incorrect rollout
    others = [j for j in range(n) if j != wrong]
    sub = list(itertools.combinations(others, k - 1))
    miss = sum(1 for s in sub if not correct & set(s)) / len(sub)
    a_pos, a_neg = (1 - rho) / sigma, (1 - rho - miss) / sigma
    return np.array([a_pos] * c + [a_neg] * (n - c))


def test_passk_worked_example():
    # n=6, c=2, k=3: rho = 1 - C(4,3)/C(6,3) = 0.8, sigma = 0.4
    # A_pos = 0.2 / 0.4 = 0.5, A_neg = (0.2 - C(3,2)/C(5,2)) / 0.4 = (0.2 - 0.3) / 0.4 = -0.25
    adv = make("passk", k=3).advantages(RolloutGroup([1, 1, 0, 0, 0, 0]))
    np.testing.assert_allclose(adv, [0.5, 0.5, -0.25, -0.25, -0.25, -0.25], atol=TOL)


@pytest.mark.parametrize(
    "n,c,k", [(8, 1, 4), (8, 3, 4), (8, 4, 2), (6, 5, 1), (7, 2, 5), (5, 1, 5)]
)
def test_passk_matches_subset_enumeration(n, c, k):
    adv = make("passk", k=k).advantages(RolloutGroup([1.0] * c + [0.0] * (n - c)))
    np.testing.assert_allclose(adv, _passk_brute_force(n, c, k), atol=TOL)


def test_passk_k1_is_population_zscore():
    r = np.array([1.0, 0.0, 0.0, 1.0, 1.0])
    expected = (r - 0.6) / math.sqrt(0.6 * 0.4)
    np.testing.assert_allclose(make("passk", k=1).advantages(RolloutGroup(r)), expected, atol=TOL)


def test_passk_saturated_and_invalid():
    # n - c = 2 < k = 3: every 3-subset holds a correct answer -> rho = 1 -> zeros
    assert np.array_equal(make("passk", k=3).advantages(RolloutGroup([1, 1, 0, 0])), np.zeros(4))
    with pytest.raises(ValueError, match="binary"):
        make("passk").advantages(RolloutGroup([0.5, 1.0, 0.0, 0.0]))
    with pytest.raises(ValueError, match="k=4 but the group has only G=3"):
        make("passk", k=4).advantages(RolloutGroup([1.0, 0.0, 0.0]))
    with pytest.raises(ValueError, match="k must be"):
        make("passk", k=0)


# -- lad --------------------------------------------------------------------------------


def test_lad_advantages_are_grpo():
    g = RolloutGroup([1.0, 0.0, 0.5, 1.0])
    np.testing.assert_allclose(make("lad").advantages(g), make("grpo").advantages(g), atol=TOL)


@pytest.mark.parametrize("f", ["js", "hellinger"])
def test_lad_gradient_at_ratio_one_by_hand(f):
    torch = pytest.importorskip("torch")
    eta = 0.25
    obj = make("lad", eta=eta, f=f)
    adv = torch.tensor([2.0, -1.0, 0.0], dtype=torch.float64)
    lp = torch.tensor(
        [[-1.0, -2.0], [-0.5, -0.7], [-3.0, -0.1]], dtype=torch.float64, requires_grad=True
    )
    loss = obj.loss_override(lp, lp.detach(), adv)
    assert loss.shape == (3, 2)
    loss.sum().backward()
    # d/dlogp [e^{A/eta} f(rho e^{-A/eta})] at rho = 1 is f'(x) with x = e^{-A/eta}
    expected = []
    for a in (2.0, -1.0, 0.0):
        x = math.exp(-a / eta)
        if f == "js":
            fprime = 0.5 * math.log(2 * x / (x + 1))  # = -1/2 log((1 + e^{A/eta}) / 2)
        else:
            fprime = 1 - 1 / math.sqrt(x)
        expected.append([fprime, fprime])
    np.testing.assert_allclose(lp.grad.numpy(), expected, atol=TOL)
    # minimising pushes positive advantages up (negative gradient), negative ones down
    assert lp.grad[0, 0] < 0 < lp.grad[1, 0]


def test_lad_brake_at_target_ratio():
    torch = pytest.importorskip("torch")
    eta, a = 0.25, 0.5
    obj = make("lad", eta=eta)
    old = torch.tensor([[-2.0]], dtype=torch.float64)
    # at rho = e^{A/eta} the loss is e^{A/eta} f(1) = 0 and its gradient vanishes
    lp = (old + a / eta).clone().requires_grad_(True)
    loss = obj.loss_override(lp, old, torch.tensor([a], dtype=torch.float64))
    loss.sum().backward()
    assert abs(loss.item()) < TOL and abs(lp.grad.item()) < TOL


def test_lad_masked_loss_by_hand():
    torch = pytest.importorskip("torch")
    eta = 0.5
    obj = make("lad", eta=eta)
    lp = torch.tensor([[-1.0, -1.0], [-2.0, -2.0]], dtype=torch.float64)
    old = torch.tensor([[-1.2, -1.0], [-2.0, -1.5]], dtype=torch.float64)
    adv = torch.tensor([1.0, -1.0], dtype=torch.float64)
    mask = torch.tensor([[1, 1], [1, 0]], dtype=torch.float64)

    def js(x):
        return 0.5 * (x * math.log(x) - (x + 1) * math.log((x + 1) / 2))

    terms = []
    for i, j in [(0, 0), (0, 1), (1, 0)]:
        a = adv[i].item()
        x = math.exp(lp[i, j].item() - old[i, j].item()) * math.exp(-a / eta)
        terms.append(math.exp(a / eta) * js(x))
    assert abs(obj.loss(lp, old, adv, mask).item() - sum(terms) / 3) < TOL


def test_lad_settings_validated():
    assert make("lad", mu=3).mu == 3
    with pytest.raises(ValueError, match="mu"):
        make("lad", mu=0)
    with pytest.raises(ValueError, match="eta"):
        make("lad", eta=0.0)
    with pytest.raises(ValueError, match="f must be"):
        make("lad", f="kl")


# -- vpo --------------------------------------------------------------------------------


def test_vpo_by_hand_with_the_same_draws():
    seed, K = 7, 5
    cv = np.array(
        [
            [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]],
            [[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]],
            [[0.0, 0.0, 1.0], [0.5, 0.5, 0.0]],
        ]
    )
    w = np.random.default_rng(seed).dirichlet(np.ones(3), size=K)  # VPO's documented draw
    R = []
    for g in range(3):
        total = 0.0
        for k in range(K):
            total += max(sum(w[k, t] * cv[g, j, t] for t in range(3)) for j in range(2))
        R.append(total / K)
    R = np.array(R)
    dev = R - R.sum() / 3
    expected = dev / (math.sqrt((dev**2).sum() / 2) + EPS)
    adv = make("vpo", m=2, K=K, seed=seed).advantages(
        RolloutGroup([0.0, 0.0, 0.0], candidate_vectors=cv)
    )
    np.testing.assert_allclose(adv, expected, atol=TOL)


def test_vpo_weight_free_case_is_grpo_of_best_candidate():
    # candidates with equal components: w . r = c for every w, so R_g = max_j c_gj
    cv = np.array([[[0.2, 0.2], [1.0, 1.0]], [[0.5, 0.5], [0.0, 0.0]], [[0.0, 0.0], [0.1, 0.1]]])
    R = np.array([1.0, 0.5, 0.1])
    dev = R - R.mean()
    std = math.sqrt((dev**2).sum() / 2)
    adv = make("vpo", m=2, K=3).advantages(RolloutGroup([0, 0, 0], candidate_vectors=cv))
    np.testing.assert_allclose(adv, dev / (std + EPS), atol=TOL)


def test_vpo_rewards_diverse_sets():
    # Dir(1,1): w1 ~ U(0,1); E[max(w1, 1 - w1)] = 3/4 for the diverse set, E[w1] = 1/2 redundant
    obj = make("vpo", m=2, K=20000, seed=3)
    cv = np.array([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [1.0, 0.0]]])
    R = obj.set_rewards(cv, obj.draw_weights(2))
    assert abs(R[0] - 0.75) < 0.01 and abs(R[1] - 0.5) < 0.01
    adv = obj.advantages(RolloutGroup([0.0, 0.0], candidate_vectors=cv))
    assert adv[0] > 0 > adv[1]


def test_vpo_errors():
    with pytest.raises(ValueError, match="candidate_vectors"):
        make("vpo").advantages(RolloutGroup([1.0, 0.0], reward_vectors=[[1, 0], [0, 1]]))
    with pytest.raises(ValueError, match="m=3 but"):
        make("vpo", m=3).advantages(RolloutGroup([1.0, 0.0], candidate_vectors=np.zeros((2, 2, 4))))
    with pytest.raises(ValueError, match="K must be"):
        make("vpo", K=0)
