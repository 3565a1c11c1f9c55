"""``hgm`` (Thompson sampling over clade statistics) and ``greedy`` (always the latest best)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from qdevolve import registry
from qdevolve.errors import ConfigError, PluginError
from qdevolve.selection import GreedySelection, HGMSelection
from qdevolve.types import Elite


def _clade(pid: str, score: float, succ: float, trials: int, gen: int = 1) -> Elite:
    return Elite(program_id=pid, score=score, generation=gen, clade_successes=succ, clade_trials=trials)


class _RecordingRng:
    """Stands in for a Generator: records the Beta parameters and returns their means."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[float], list[float]]] = []

    def beta(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        self.calls.append((list(a), list(b)))
        return np.asarray(a) / (np.asarray(a) + np.asarray(b))


def test_hgm_draws_beta_with_the_papers_parameters() -> None:
    cands = [_clade("a", 0.9, 1.0, 10), _clade("b", 0.1, 6.5, 8), _clade("c", 0.5, 0.0, 0)]
    rng = _RecordingRng()
    chosen = HGMSelection(tau=2.0).select(cands, rng)  # type: ignore[arg-type]
    a, b = rng.calls[0]
    assert a == pytest.approx([2 * (1 + 1.0), 2 * (1 + 6.5), 2 * (1 + 0)])
    assert b == pytest.approx([2 * (1 + 9), 2 * (1 + 1.5), 2 * (1 + 0)])
    assert chosen[0].program_id == "b"  # the best clade, though its own score is the worst


def test_hgm_follows_the_clade_not_the_score() -> None:
    cands = [_clade("top_score", 0.95, 2, 40), _clade("fertile", 0.2, 30, 40), _clade("fresh", 0.5, 0, 0)]
    rule = HGMSelection(tau=1.0)
    picks = [rule.select(cands, np.random.default_rng(s))[0].program_id for s in range(400)]
    freq = {k: picks.count(k) / len(picks) for k in ("top_score", "fertile", "fresh")}
    assert freq["fertile"] > 0.6 and freq["top_score"] < 0.05
    assert 0.05 < freq["fresh"] < 0.4  # an untried clade still gets explored (Beta(1, 1))
    p = rule.probabilities(cands)
    assert p.sum() == pytest.approx(1.0) and p == pytest.approx([freq[k] for k in freq], abs=0.08)


def test_hgm_tau_trades_exploration_for_exploitation() -> None:
    cands = [_clade("a", 0.5, 6, 10), _clade("b", 0.5, 4, 10)]
    def share_of_a(tau: float) -> float:
        rule = HGMSelection(tau=tau)
        return sum(rule.select(cands, np.random.default_rng(s))[0].program_id == "a" for s in range(300)) / 300
    assert share_of_a(100.0) > 0.9 > share_of_a(1.0) > share_of_a(0.01) > 0.5


def test_hgm_is_deterministic_and_draws_without_replacement() -> None:
    cands = [_clade(f"p{i}", i / 10, i, 10) for i in range(6)]
    rule = registry.selection.create({"type": "hgm", "tau": 0.5})
    one = [e.program_id for e in rule.select(cands, np.random.default_rng(7), n=3)]
    assert one == [e.program_id for e in rule.select(cands, np.random.default_rng(7), n=3)]
    assert len(set(one)) == 3
    many = rule.select(cands[:2], np.random.default_rng(0), n=5)
    assert len(many) == 5 and {e.program_id for e in many} <= {"p0", "p1"}
    assert rule.select(cands[:1], np.random.default_rng(1)) == cands[:1]
    with pytest.raises(ValueError, match="empty"):
        rule.select([], np.random.default_rng(0))


@pytest.mark.parametrize("tau", [0, -1.0, float("nan"), float("inf"), "x", None])
def test_hgm_rejects_a_bad_tau(tau: object) -> None:
    with pytest.raises(ConfigError, match="hgm selection tau"):
        registry.selection.create({"type": "hgm", "tau": tau})


def test_hgm_option_typo_gets_did_you_mean() -> None:
    with pytest.raises(PluginError, match="did you mean 'tau'"):
        registry.selection.create({"type": "hgm", "tua": 1.0})


def test_hgm_without_clade_statistics_names_the_dgm_archive() -> None:
    cands = [_clade("a", 0.5, 1, 2), Elite(program_id="plain7", score=0.4)]
    with pytest.raises(ConfigError, match=r"program plain7 has none.*dgm archive"):
        HGMSelection().select(cands, np.random.default_rng(0))


def test_greedy_takes_the_latest_best() -> None:
    cands = [Elite(program_id="old_best", score=0.8, generation=1), Elite(program_id="low", score=0.3, generation=5),
             Elite(program_id="new_best", score=0.8, generation=3), Elite(program_id="same_gen", score=0.8, generation=3)]
    rule = registry.selection.create({"type": "greedy"})
    rng = np.random.default_rng(0)
    before = rng.bit_generator.state
    assert rule.select(cands, rng)[0].program_id == "same_gen"  # highest generation, then latest inserted
    assert rng.bit_generator.state == before  # no random draw
    assert [e.program_id for e in rule.select(cands, rng, n=3)] == ["same_gen", "new_best", "old_best"]
    assert [e.program_id for e in rule.select(cands[:2], rng, n=3)] == ["old_best", "low", "old_best"]
    better = [*cands, Elite(program_id="higher_but_old", score=0.81, generation=0)]
    assert GreedySelection().select(better, rng)[0].program_id == "higher_but_old"  # score first
    assert GreedySelection().probabilities(cands).tolist() == [0, 0, 0, 1]


def test_both_rules_are_registered_and_declared_as_entry_points() -> None:
    assert registry.selection.get("hgm") is HGMSelection
    assert registry.selection.get("greedy") is GreedySelection
    text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    group = text.split('[project.entry-points."qdevolve.selection"]', 1)[1].split("\n[", 1)[0]
    assert 'hgm = "qdevolve.selection.hgm:HGMSelection"' in group  # `qdevolve plugins` lists it once installed
    assert 'greedy = "qdevolve.selection.greedy:GreedySelection"' in group
