"""Selection rules: contract on every rule, formulas, empirical distributions, inspirations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from qdevolve import registry
from qdevolve.errors import ConfigError
from qdevolve.selection.inspirations import sample_inspirations
from qdevolve.selection.rules import (
    DGMSelection,
    NoveltyWeightedSelection,
    PowerLawSelection,
    TournamentSelection,
    UniformSelection,
    knn_feature_novelty,
)
from qdevolve.types import Elite

RULES = {
    "uniform": {"type": "uniform"},
    "tournament": {"type": "tournament", "k": 3},
    "dgm": {"type": "dgm"},
    "dgm_median": {"type": "dgm", "center": "median", "lambda": 2.0},
    "power_law": {"type": "power_law", "alpha": 1.5},
    "novelty_weighted": {"type": "novelty_weighted", "k": 2},
    "novelty_weighted_q": {"type": "novelty_weighted", "quality": 0.5},
}


def _elites(n: int = 8, seed: int = 0) -> list[Elite]:
    rng = np.random.default_rng(seed)
    return [Elite(program_id=f"p{i}", score=float(np.round(rng.random(), 2)), cell=str(i % 5),
                  features={"a": float(rng.random()), "b": float(rng.random())},
                  children=int(rng.integers(0, 4))) for i in range(n)]


@pytest.mark.parametrize("name", list(RULES))
def test_rule_contract(name: str) -> None:
    rule = registry.selection.create(RULES[name])
    cands = _elites()
    one = rule.select(cands, np.random.default_rng(0))
    assert len(one) == 1 and one[0] in cands
    two = rule.select(cands, np.random.default_rng(0), n=2)
    assert len(two) == 2 and two[0].program_id != two[1].program_id  # distinct while possible
    many = rule.select(cands[:3], np.random.default_rng(0), n=5)  # more than candidates: repeats allowed
    assert len(many) == 5 and all(m in cands[:3] for m in many)
    again = rule.select(cands, np.random.default_rng(0), n=2)
    assert [e.program_id for e in again] == [e.program_id for e in two]
    assert rule.select(cands[:1], np.random.default_rng(1)) == cands[:1]
    with pytest.raises(ValueError, match="empty"):
        rule.select([], np.random.default_rng(0))
    p = rule.probabilities(cands)
    assert p.shape == (8,) and p.sum() == pytest.approx(1.0)
    assert p.min() >= 0 if name == "tournament" else p.min() > 0  # a tournament never picks its k-1 worst


@pytest.mark.parametrize("name", list(RULES))
def test_empirical_frequencies_match_probabilities(name: str) -> None:
    rule = registry.selection.create(RULES[name])
    cands = _elites(6, seed=4)
    rng = np.random.default_rng(123)
    draws = 6000
    counts = np.zeros(len(cands))
    index = {e.program_id: i for i, e in enumerate(cands)}
    for _ in range(draws):
        counts[index[rule.select(cands, rng)[0].program_id]] += 1
    p = rule.probabilities(cands)
    # each frequency within 5 standard errors of its probability
    se = np.sqrt(p * (1 - p) / draws)
    assert np.all(np.abs(counts / draws - p) <= 5 * se + 1e-9), (counts / draws, p)


def test_dgm_formula() -> None:
    cands = [Elite("a", 0.9, children=0), Elite("b", 0.5, children=1), Elite("c", 0.1, children=3)]
    rule = DGMSelection(lambda_=10.0, alpha_0=0.5)
    s = [1 / (1 + math.exp(-10 * (x - 0.5))) for x in (0.9, 0.5, 0.1)]
    w = [s[0] / 1, s[1] / 2, s[2] / 4]
    assert rule.probabilities(cands) == pytest.approx(np.array(w) / sum(w))
    # huge negative scores underflow the sigmoid: fall back to 1/(1+children)
    low = [Elite("a", -1e6, children=0), Elite("b", -1e6, children=1)]
    assert rule.probabilities(low) == pytest.approx([2 / 3, 1 / 3])
    assert DGMSelection(**{"lambda": 3.0}).lambda_ == 3.0
    with pytest.raises(ConfigError, match="unknown option"):
        DGMSelection(temperature=1.0)


def test_power_law_and_tournament_formulas() -> None:
    cands = [Elite("a", 0.1), Elite("b", 0.9), Elite("c", 0.5)]
    assert PowerLawSelection(alpha=1.0).probabilities(cands) == pytest.approx(np.array([1 / 3, 1, 1 / 2]) / (11 / 6))
    assert PowerLawSelection(alpha=0.0).probabilities(cands) == pytest.approx([1 / 3] * 3)
    # tournament of 2 among 3: best wins 2/3, middle 1/3, worst never
    assert TournamentSelection(k=2).probabilities(cands) == pytest.approx([0, 2 / 3, 1 / 3])
    assert TournamentSelection(k=1).probabilities(cands) == pytest.approx(UniformSelection().probabilities(cands))
    with pytest.raises(ConfigError):
        TournamentSelection(k=0)
    with pytest.raises(ConfigError):
        PowerLawSelection(alpha=-1)


def test_novelty_weighted_prefers_isolated_programs() -> None:
    crowd = [Elite(f"c{i}", 1.0, features={"a": 0.5 + 0.001 * i, "b": 0.5}) for i in range(5)]
    loner = Elite("loner", 0.0, features={"a": 0.0, "b": 0.0})
    rule = NoveltyWeightedSelection(k=2)
    p = rule.probabilities([*crowd, loner])
    assert p[-1] > 0.9
    nov = knn_feature_novelty([*crowd, loner], 2)
    assert nov[-1] == pytest.approx(max(nov))
    # the archive's own novelty is used when every candidate has one
    given = [Elite("x", 0.0, novelty=3.0), Elite("y", 0.0, novelty=1.0)]
    assert rule.probabilities(given) == pytest.approx([3 / 4, 1 / 4], rel=1e-4)


def test_inspirations_best_then_other_cells() -> None:
    cands = [Elite(f"p{i}", float(i), cell=str(i % 4)) for i in range(12)]
    insp = sample_inspirations(cands, "p11", np.random.default_rng(0), n_best=2, n_diverse=3)
    ids = [e.program_id for e in insp]
    assert ids[:2] == ["p10", "p9"] and "p11" not in ids and len(set(ids)) == 5
    # the diverse picks avoid the cells of the parent (3) and of the best (2, 1) while others exist
    assert {e.cell for e in insp[2:]} == {"0"}
    assert sample_inspirations(cands[:2], "p0", np.random.default_rng(0), n_best=3, n_diverse=3) == [cands[1]]
    assert sample_inspirations([], "p0", np.random.default_rng(0), n_best=1, n_diverse=1) == []


def test_feature_novelty_subset_for_large_candidate_sets() -> None:
    rng = np.random.default_rng(0)
    cands = [Elite(f"p{i}", 0.0, features={"a": float(x), "b": float(y)}) for i, (x, y) in enumerate(rng.random((300, 2)))]
    full = knn_feature_novelty(cands, 5, max_reference=1000)
    approx = knn_feature_novelty(cands, 5, max_reference=200)
    assert full.shape == approx.shape == (300,)
    assert np.all(approx >= full - 1e-12)  # fewer neighbours can only be farther
    assert np.corrcoef(full, approx)[0, 1] > 0.7
