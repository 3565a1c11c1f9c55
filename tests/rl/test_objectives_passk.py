"""Pass@k training advantages on hand-computed groups.

Every expected value is derived in the test from the objective's formula (docs/objectives.md)
with explicit arithmetic, never by calling the implementation.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from qdevolve.rl import RolloutGroup
from tests.rl._objectives import TOL, make

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
