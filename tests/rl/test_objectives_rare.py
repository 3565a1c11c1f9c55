"""Rare (uniqueness-weighted GRPO) on hand-computed groups.

Every expected value is derived in the test from the objective's formula (docs/objectives.md)
with explicit arithmetic, never by calling the implementation.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from qdevolve.rl import RolloutGroup
from tests.rl._objectives import EPS, TOL, make

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
        make("rare", correct_threshold=0.5).advantages(g2),
        [dev[0] / 3, dev[1] / 3, dev[2]],
        atol=TOL,
    )
    with pytest.raises(ValueError, match="count must be one of"):
        make("rare", count="wrong")


def test_rare_requires_cluster_keys():
    with pytest.raises(ValueError, match="cluster_keys"):
        make("rare").advantages(RolloutGroup([1.0, 0.0]))


def test_rare_positive_weighting_breaks_the_zero_sum_by_hand():
    # Keys x x x y z z, rewards 1 1 1 0 0 1 (as above). GRPO's advantages sum to 0:
    # 4 x (1/3) + 2 x (-2/3) = 0. Rare (alpha = 1, among correct, positive only) shrinks the
    # three x's to (1/3)/3 each and keeps z (1/3) and the two wrong (-2/3):
    # sum = 3 x 1/9 + 1/3 - 4/3 = -2/3, in units of 1 / (std + eps).
    g = RolloutGroup([1.0, 1.0, 1.0, 0.0, 0.0, 1.0], cluster_keys=list("xxxyzz"))
    std = math.sqrt((4 * (1 / 3) ** 2 + 2 * (2 / 3) ** 2) / 5)
    assert math.isclose(make("grpo").advantages(g).sum(), 0.0, abs_tol=TOL)
    assert math.isclose(make("rare").advantages(g).sum(), (-2 / 3) / (std + EPS), abs_tol=TOL)
    # alpha = 2: x's get (1/3)/9 each: sum = 3/27 + 1/3 - 4/3 = -8/9
    assert math.isclose(
        make("rare", alpha=2.0).advantages(g).sum(), (-8 / 9) / (std + EPS), abs_tol=TOL
    )


def test_rare_counts_inside_each_group_without_memory():
    # "Rare" is relative to the group, not to earlier steps: a group scored after many
    # groups full of answer "a" gets the same advantages as when scored first.
    obj = make("rare")
    g = RolloutGroup([1.0, 0.0, 1.0, 1.0], cluster_keys=["a", "w", "a", "b"])
    first = obj.advantages(g)
    for _ in range(5):
        obj.advantages(RolloutGroup([1.0, 1.0, 0.0], cluster_keys=["a", "a", "w"]))
    np.testing.assert_array_equal(obj.advantages(g), first)
    # by hand: mean 3/4, deviations [1/4, -3/4, 1/4, 1/4]; Bessel var (3/16 + 9/16) / 3 = 1/4
    base = np.array([0.25, -0.75, 0.25, 0.25]) / (0.5 + EPS)
    np.testing.assert_allclose(first, [base[0] / 2, base[1], base[2] / 2, base[3]], atol=TOL)
