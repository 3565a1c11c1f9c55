"""best_child selection: TTT-Discover's PUCT over the best child each parent produced."""

from __future__ import annotations

import math

import numpy as np
import pytest

from qdevolve import registry
from qdevolve.errors import ConfigError
from qdevolve.selection import BestChildSelection
from qdevolve.types import Elite


def _three() -> list[Elite]:
    return [Elite("A", 1.0, children=0), Elite("B", 0.5, children=2), Elite("C", 0.0, children=0)]


def test_puct_scores_by_hand():
    rule = registry.selection.create({"type": "best_child"})
    cands = _three()
    # prior by own-score rank: A 3/6, B 2/6, C 1/6; scale = 1 - 0 = 1; T = 2 children in all
    # no record yet: Q = own score: U = [1 + 0.5 sqrt 3, 0.5 + (1/3) sqrt 3 / 3, (1/6) sqrt 3]
    r3 = math.sqrt(3.0)
    np.testing.assert_allclose(rule.scores(cands), [1 + 0.5 * r3, 0.5 + r3 / 9, r3 / 6], atol=1e-12)
    assert rule.select(cands, np.random.default_rng(0))[0].program_id == "A"
    # B produced a child scoring 2.0 (and one that failed): Q_B = 2.0 -> U_B = 2 + sqrt 3 / 9
    rule.observe_child(["B"], 2.0)
    rule.observe_child(["B"], None)
    rule.observe_child(["B"], 1.5)  # the best child is kept
    assert rule.best_child("B") == 2.0
    np.testing.assert_allclose(rule.scores(cands)[1], 2 + r3 / 9, atol=1e-12)
    assert [e.program_id for e in rule.select(cands, np.random.default_rng(0), n=2)] == ["B", "A"]
    assert rule.probabilities(cands).tolist() == [0.0, 1.0, 0.0]
    # c = 0 is pure exploitation of Q: B (2.0) > A (1.0) > C (0.0)
    greedy = BestChildSelection(c=0.0)
    greedy.rebuild([(["B"], 2.0), (["C"], None)])
    np.testing.assert_allclose(greedy.scores(cands), [1.0, 2.0, 0.0])


def test_a_record_without_children_counted_is_ignored_and_ties_go_to_own_score():
    rule = BestChildSelection(c=0.0)
    rule.observe_child(["C"], 9.0)  # the archive has not counted C's child: Q_C = own score
    cands = [Elite("A", 1.0), Elite("C", 1.0)]
    assert rule.scores(cands).tolist() == [1.0, 1.0]
    assert rule.select(cands, np.random.default_rng(0))[0].program_id == "A"  # tie: earlier


def test_sampling_variant_follows_its_probabilities():
    rule = BestChildSelection(temperature=0.5)
    cands = _three()
    rule.observe_child(["B"], 2.0)
    u = rule.scores(cands)
    w = np.exp((u - u.max()) / 0.5)  # scale = 1
    p = rule.probabilities(cands)
    np.testing.assert_allclose(p, w / w.sum())
    rng = np.random.default_rng(5)
    draws = 4000
    counts = np.zeros(3)
    for _ in range(draws):
        counts["ABC".index(rule.select(cands, rng)[0].program_id)] += 1
    se = np.sqrt(p * (1 - p) / draws)
    assert np.all(np.abs(counts / draws - p) <= 5 * se + 1e-9)
    two = rule.select(cands, np.random.default_rng(1), n=2)
    assert two[0].program_id != two[1].program_id


def test_contract_and_errors():
    rule = BestChildSelection()
    with pytest.raises(ValueError, match="empty"):
        rule.select([], np.random.default_rng(0))
    one = [Elite("only", 0.3)]
    assert rule.select(one, np.random.default_rng(0), n=3) == one * 3
    with pytest.raises(ConfigError, match="c must be"):
        BestChildSelection(c=-1)
    with pytest.raises(ConfigError, match="temperature"):
        BestChildSelection(temperature=float("nan"))
    assert registry.selection.get("best_child") is BestChildSelection
