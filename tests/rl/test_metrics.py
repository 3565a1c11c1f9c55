"""Diversity metrics against brute-force enumeration and hand-computed values."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from qdevolve.rl import metrics as M

TOL = 1e-9


def brute_pass_at_k(n: int, c: int, k: int) -> float:
    """Fraction of k-subsets of n samples (first c correct) containing a correct one."""
    subsets = list(itertools.combinations(range(n), k))
    return sum(1 for s in subsets if min(s) < c) / len(subsets)


@pytest.mark.parametrize(
    "n,c,k",
    [(n, c, k) for n in (1, 2, 5, 8, 10) for c in range(0, n + 1) for k in range(1, n + 1)],
)
def test_pass_at_k_matches_subset_enumeration(n, c, k):
    assert abs(M.pass_at_k(n, c, k) - brute_pass_at_k(n, c, k)) < TOL


def test_pass_at_k_is_stable_for_large_n():
    # exact rational value 1 - C(997, 500) / C(1000, 500) with big integers
    exact = 1 - Fraction(math.comb(997, 500), math.comb(1000, 500))
    assert abs(M.pass_at_k(1000, 3, 500) - float(exact)) < TOL
    assert M.pass_at_k(100_000, 0, 256) == 0.0
    assert M.pass_at_k(256, 255, 2) == 1.0


def test_pass_at_k_validation_and_mean():
    with pytest.raises(ValueError, match="k <= n"):
        M.pass_at_k(4, 1, 5)
    with pytest.raises(ValueError, match="c must be"):
        M.pass_at_k(4, 5, 1)
    assert abs(M.mean_pass_at_k([4, 4], [0, 2], 1) - 0.25) < TOL


def test_exact_pass_at_k_matches_enumeration_of_draws():
    probs = np.array([0.1, 0.25, 0.05, 0.4, 0.2])
    correct = np.array([True, False, True, False, False])
    for k in (1, 2, 3):
        total = 0.0
        for draw in itertools.product(range(5), repeat=k):
            if any(correct[i] for i in draw):
                total += math.prod(probs[i] for i in draw)
        assert abs(M.exact_pass_at_k(probs, correct, k) - total) < TOL
    as_map = {"a": 0.1, "b": 0.25, "c": 0.05, "d": 0.4, "e": 0.2}
    assert abs(M.exact_pass_at_k(as_map, {"a", "c"}, 3) - (1 - 0.85**3)) < TOL
    assert M.exact_pass_at_k([0.0, 1.0], [False, True], 4) == 1.0
    with pytest.raises(ValueError, match="shape"):
        M.exact_pass_at_k([0.5, 0.5], [True], 1)


def test_distinct_correct_and_entropies():
    answers = ["7", "7", "14", "3", "21", "14", "5"]
    correct = [True, True, True, False, True, True, False]
    assert M.distinct_correct(answers, correct) == 3  # 7, 14, 21
    assert abs(M.entropy([0.25] * 4) - math.log(4)) < TOL
    assert abs(M.effective_outcomes([0.25] * 4) - 4.0) < 1e-9
    assert M.entropy([1.0, 0.0, 0.0]) == 0.0
    # restricted to correct outcomes and renormalised: [0.2, 0.2] -> uniform over 2
    assert abs(M.entropy([0.2, 0.5, 0.2, 0.1], mask=[True, False, True, False]) - math.log(2)) < TOL
    # plug-in entropy of correct samples: 7 x2, 14 x2, 21 x1 -> p = [.4, .4, .2]
    expected = -(2 * 0.4 * math.log(0.4) + 0.2 * math.log(0.2))
    assert abs(M.answer_entropy(answers, correct) - expected) < TOL
    assert abs(M.entropy({"a": 3, "b": 1}) - -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))) < TOL


def test_support_change_by_hand():
    base = {"a": 0.4, "b": 0.3, "c": 0.2, "d": 0.1, "e": 0.0}
    trained = {"a": 0.9, "b": 0.02, "c": 0.0, "d": 0.0, "e": 0.08}
    ch = M.support_change(base, trained, threshold=0.05)
    assert ch.base == {"a", "b", "c", "d"} and ch.trained == {"a", "e"}
    assert ch.retained == {"a"} and ch.lost == {"b", "c", "d"} and ch.gained == {"e"}
    assert ch.retained_fraction == 0.25
    assert ch.to_dict()["lost"] == 3
    arr = M.support_change([0.4, 0.3, 0.3], [0.5, 0.0, 0.5], 0.1, mask=[True, True, False])
    assert arr.base == {0, 1} and arr.trained == {0} and arr.lost == {1}
    with pytest.raises(ValueError, match="threshold"):
        M.support({"a": 1.0}, 0.0)


def test_token_entropy_by_hand():
    v = 5
    uniform = np.zeros((2, 3, v))
    assert abs(M.token_entropy(uniform) - math.log(v)) < TOL
    logits = np.array([[0.0, math.log(3.0)]])  # p = [1/4, 3/4]
    expected = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    assert abs(M.token_entropy(logits) - expected) < TOL
    logprobs = np.array([[[0.0, -np.inf], [math.log(0.5), math.log(0.5)]]])
    assert abs(M.token_entropy(logprobs=logprobs) - math.log(2) / 2) < TOL
    assert abs(M.token_entropy(logprobs=logprobs, mask=[[0, 1]]) - math.log(2)) < TOL
    torch = pytest.importorskip("torch")
    assert abs(M.token_entropy(torch.zeros(4, v)) - math.log(v)) < 1e-6
    with pytest.raises(ValueError, match="exactly one"):
        M.token_entropy()


def test_never_solved_and_prompt_changes():
    assert M.never_solved([3, 0, 1, 0]) == [1, 3]
    assert M.never_solved({"p1": 0, "p2": 5}) == ["p1"]
    ch = M.prompt_changes({"a": 0, "b": 2, "c": 1, "d": 0}, {"a": 4, "b": 0, "c": 3, "d": 0})
    assert ch == {"gained": ["a"], "lost": ["b"]}


def brute_best_at_k(scores, k):
    subsets = list(itertools.combinations(range(len(scores)), k))
    return sum(max(scores[i] for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("k", [1, 2, 3, 4, 6])
def test_best_at_k_matches_subset_enumeration(k):
    vectors = np.array(
        [[1, 0, 0, 1], [0, 0, 0, 0], [1, 1, 1, 0], [0, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 1]],
        dtype=float,
    )
    scores = vectors.mean(axis=1).tolist()
    assert abs(M.best_at_k(vectors, k) - brute_best_at_k(scores, k)) < TOL
    w = np.array([0.1, 0.2, 0.3, 0.4])
    assert (
        abs(M.best_at_k(vectors, k, weights=w) - brute_best_at_k((vectors @ w).tolist(), k)) < TOL
    )
    # coverage: expected fraction of tests passed by at least one of k samples
    subsets = list(itertools.combinations(range(6), k))
    brute_cov = sum(vectors[list(s)].max(axis=0).mean() for s in subsets) / len(subsets)
    assert abs(M.coverage_at_k(vectors, k) - brute_cov) < TOL


def test_best_at_k_large_n_is_finite_and_monotone():
    rng = np.random.default_rng(0)
    v = rng.random((500, 3))
    vals = [M.best_at_k(v, k) for k in (1, 10, 100, 500)]
    assert all(a <= b + 1e-12 for a, b in zip(vals, vals[1:], strict=False))
    assert abs(vals[0] - v.mean(axis=1).mean()) < TOL
    assert abs(vals[-1] - v.mean(axis=1).max()) < TOL


def test_js_distance_by_hand():
    assert M.js_distance([0.5, 0.5], [0.5, 0.5]) == 0.0
    # disjoint supports: JS = log 2
    assert abs(M.js_distance([1.0, 0.0], [0.0, 1.0]) - math.sqrt(math.log(2))) < TOL
    # p = [1, 0], q = [1/2, 1/2]: m = [3/4, 1/4]
    js = 0.5 * math.log(1 / 0.75) + 0.5 * (0.5 * math.log(0.5 / 0.75) + 0.5 * math.log(0.5 / 0.25))
    assert abs(M.js_distance([1.0, 0.0], [0.5, 0.5]) - math.sqrt(js)) < TOL
    # restricted to the first two outcomes and renormalised
    assert M.js_distance([0.2, 0.2, 0.6], [0.4, 0.4, 0.2], mask=[True, True, False]) == 0.0


def test_top_share_and_modes_above_by_hand():
    # correct mass [0.3, 0.1, 0.09, 0.01] of total 0.5 -> shares 0.6, 0.2, 0.18, 0.02
    p = np.array([0.3, 0.1, 0.09, 0.01, 0.5])
    correct = np.array([True, True, True, True, False])
    assert M.top_share(p, correct) == pytest.approx(0.6)
    assert M.modes_above(p, 0.02, correct) == 4  # 0.01 / 0.5 = 0.02 is at the threshold
    assert M.modes_above(p, 0.1, correct) == 3
    assert M.modes_above(p, 0.5, correct) == 1
    assert M.top_share(np.zeros(3)) == 0.0 and M.modes_above(np.zeros(3)) == 0
    with pytest.raises(ValueError, match="share"):
        M.modes_above(p, 0.0)
