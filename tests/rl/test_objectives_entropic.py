"""The entropic (TTT-Discover) objective on hand-computed groups.

Every expected value is derived in the test from the objective's formula (docs/objectives.md)
with explicit arithmetic, never by calling the implementation.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from qdevolve.rl import RolloutGroup
from tests.rl._objectives import make

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
    a = math.exp(
        beta
    )  # about 12.9: the best answer gets a / 1 - 1, every other 1 / ((a + 2) / 3) - 1
    np.testing.assert_allclose(
        adv, [a - 1, 3 / (a + 2) - 1, 3 / (a + 2) - 1, 3 / (a + 2) - 1], rtol=1e-6
    )
    # the adaptive beta makes advantages invariant to the reward's scale and offset
    np.testing.assert_allclose(
        make("entropic").advantages(RolloutGroup([7.0, 5.0, 5.0, 5.0])), adv, rtol=1e-6
    )
    # half the group at the maximum: KL -> log(4/2) = ln 2 only as beta -> infinity (in floats
    # once exp(-beta) underflows against 1); the search ends at a large beta, where the winners
    # get (G-1)/(c-1) - 1 = 2 and the rest -1
    beta_half = solve_beta(np.array([1.0, 1.0, 0.0, 0.0]), beta_max=64.0)
    assert 30.0 < beta_half <= 64.0
    np.testing.assert_allclose(
        make("entropic", beta_max=64.0).advantages(RolloutGroup([1.0, 1.0, 0.0, 0.0])),
        [2.0, 2.0, -1.0, -1.0],
        atol=1e-9,
    )
    with pytest.raises(ValueError, match="beta must be finite"):
        make("entropic", beta=0.0)
    with pytest.raises(ValueError, match="iters"):
        make("entropic", iters=0)
