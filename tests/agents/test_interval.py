"""The bootstrap interval behind the agents' held-out verdict."""

from __future__ import annotations

import numpy as np
import pytest

from qdevolve.agents.interval import difference, mean_interval


def test_a_clear_difference_is_beyond_noise_and_its_interval_brackets_the_estimate() -> None:
    d = difference([1.0, 1.1, 0.9, 1.05], [0.0, 0.1, -0.1, 0.05])
    assert d.estimate == pytest.approx(1.0)
    assert d.lo is not None and d.hi is not None and 0.8 < d.lo < 1.0 < d.hi < 1.2
    assert d.within_noise is False and d.sign == 1
    assert d.text().startswith("+1.0000, 90 % interval [") and d.text().endswith("over 4 draws each: beyond noise")
    assert difference([0.0, 0.1, -0.1], [1.0, 1.1, 0.9]).sign == -1


def test_overlapping_draws_are_within_noise() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.normal(0.0, 1.0, 8).tolist(), rng.normal(0.0, 1.0, 8).tolist()
    d = difference(a, b)
    assert d.within_noise is True and d.sign == 0 and "within noise" in d.text()


def test_the_interval_is_reproducible_and_narrows_with_more_draws() -> None:
    rng = np.random.default_rng(0)
    few_a, few_b = rng.normal(0.5, 0.2, 4).tolist(), rng.normal(0.3, 0.2, 4).tolist()
    many_a, many_b = rng.normal(0.5, 0.2, 200).tolist(), rng.normal(0.3, 0.2, 200).tolist()
    assert difference(few_a, few_b) == difference(few_a, few_b)
    few, many = difference(few_a, few_b), difference(many_a, many_b)
    assert (many.hi - many.lo) < (few.hi - few.lo) / 3
    assert many.lo < 0.2 < many.hi  # the true difference


def test_too_few_draws_give_no_interval_and_no_verdict() -> None:
    d = difference([0.4], [0.1, 0.2])
    assert d.lo is None and d.within_noise is None and d.sign == 0 and "no interval" in d.text()
    assert mean_interval([0.3]) == (0.3, None, None)
    mean, lo, hi = mean_interval([0.1, 0.2, 0.3])
    assert mean == pytest.approx(0.2) and lo is not None and hi is not None and 0.1 <= lo < 0.2 < hi <= 0.3
    with pytest.raises(ValueError):
        difference([], [1.0])


def test_the_paired_interval_widens_with_the_noise_inside_each_unit() -> None:
    from qdevolve.agents.interval import paired_difference

    quiet = [([0.10, 0.10], [0.05, 0.05]), ([0.12, 0.12], [0.06, 0.06]), ([0.11, 0.11], [0.07, 0.07])]
    noisy = [([0.0, 0.20], [0.0, 0.10]), ([0.04, 0.20], [0.12, 0.0]), ([0.22, 0.0], [0.14, 0.0])]
    q, n = paired_difference(quiet), paired_difference(noisy)
    assert q.estimate == pytest.approx(0.05) and n.estimate == pytest.approx(0.05)
    assert q.sign == 1 and 0.035 <= q.lo < 0.05 < q.hi <= 0.065  # unit-to-unit spread only
    assert n.within_noise is True  # the same mean difference, but each unit's draws disagree
    assert paired_difference([([0.2], [0.1])]).lo is None
