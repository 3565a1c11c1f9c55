"""IPS-GRPO (inverse probability scaling) on hand-computed groups.

Every expected value is derived in the test from the objective's formula (docs/objectives.md)
with explicit arithmetic, never by calling the implementation.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from qdevolve.rl import RolloutGroup
from tests.rl._objectives import EPS, TOL, make

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
