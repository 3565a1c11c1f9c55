"""GRPO-family objectives (grpo, dr_grpo, reinforce_rej, raft) on hand-computed groups.

Every expected value is derived in the test from the objective's formula (docs/objectives.md)
with explicit arithmetic, never by calling the implementation.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from qdevolve.rl import RolloutGroup
from tests.rl._objectives import EPS, TOL, make

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
