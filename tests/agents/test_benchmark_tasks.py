"""The benchmark's tasks, the agent's score and the held-out rule (no sandbox: fast)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from qdevolve.agents import AgentScorer, ScoringSettings, TaskRun, heldout_comparison, load_tasks
from qdevolve.agents.benchmark import normalised_improvement
from qdevolve.agents.self_mutation import self_feedback
from qdevolve.errors import ConfigError
from qdevolve.types import EvalResult, Program

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agents"
SPEC = {"bowl": {}, "spread_points": {}, "line_fit": {"heldout": True}, "wave_fit": {"heldout": True}}


def test_the_example_tasks_load_with_descriptions_and_heldout_marks() -> None:
    tasks = load_tasks(EXAMPLE / "tasks", SPEC)
    assert [t.name for t in tasks] == list(SPEC)
    assert [t.metric for t in tasks] == ["bowl", "spread_points", "heldout/line_fit", "heldout/wave_fit"]
    assert all(t.description and not t.description.startswith("#") for t in tasks)
    assert "unit square" in tasks[1].description
    assert tasks[0].evaluator == EXAMPLE / "tasks" / "bowl" / "evaluator.py"


def _copy_tasks(tmp_path: Path) -> Path:
    root = tmp_path / "ex" / "tasks"
    shutil.copytree(EXAMPLE / "tasks", root)
    return root


@pytest.mark.parametrize("spec, words", [
    ({"../bowl": {}}, "plain directory name"),
    ({"bowl/../x": {}}, "plain directory name"),
    ({"missing": {}}, "missing"),
    ({"bowl": {"heldout": True}}, "every task is held out"),
    ({"bowl": {"held_out": True}}, "unknown key(s) held_out"),
    ({}, "no task named"),
])
def test_bad_task_specs_are_config_errors(tmp_path: Path, spec: dict[str, Any], words: str) -> None:
    root = _copy_tasks(tmp_path)
    with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace(")", r"\)")):
        load_tasks(root, spec)


def test_a_task_directory_that_links_outside_the_example_is_refused(tmp_path: Path) -> None:
    root = _copy_tasks(tmp_path)
    outside = tmp_path / "outside"
    shutil.copytree(EXAMPLE / "tasks" / "bowl", outside)
    (root / "escape").symlink_to(outside)
    with pytest.raises(ConfigError, match="leads outside"):
        load_tasks(root, {"escape": {}})
    (root / "bowl" / "evaluator.py").unlink()
    (root / "bowl" / "evaluator.py").symlink_to(outside / "evaluator.py")
    with pytest.raises(ConfigError, match="evaluator.py is missing"):
        load_tasks(root, {"bowl": {}})


def test_normalised_improvement() -> None:
    assert normalised_improvement(0.2, 0.6, 1.0) == pytest.approx(0.5)
    assert normalised_improvement(0.2, 0.1, 1.0) == 0.0
    assert normalised_improvement(0.2, 5.0, 1.0) == 1.0
    assert normalised_improvement(1.0, 1.0, 1.0) == 0.0


def test_scoring_settings_name_unknown_keys() -> None:
    assert ScoringSettings.from_options({"iterations": "2"}).iterations == 2
    with pytest.raises(ConfigError, match="unknown key.*iteration.*known: iterations"):
        ScoringSettings.from_options({"iteration": 2})
    with pytest.raises(ConfigError, match="iterations must be >= 1"):
        ScoringSettings.from_options({"iterations": 0})


def test_the_score_and_tests_hold_only_the_scoring_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    tasks = load_tasks(EXAMPLE / "tasks", SPEC)
    improvements = {"bowl": 0.2, "spread_points": 0.4, "line_fit": 1.0, "wave_fit": 0.9}
    scorer = AgentScorer(tasks, ScoringSettings(), sandbox=None, sandbox_spec={"type": "local"})
    monkeypatch.setattr(scorer, "run_task", lambda code, task: TaskRun(task, 0.1, 0.5, improvements[task.name]))
    result = scorer.score("def propose(task, parent, feedback, tools):\n    return parent\n")
    assert result.score == pytest.approx(0.3)  # held-out 1.0 and 0.9 would raise it
    assert result.tests == [pytest.approx(0.2), pytest.approx(0.4)]
    assert result.metrics["heldout/line_fit"] == 1.0 and result.metrics["heldout/wave_fit"] == 0.9
    assert set(result.metrics) == {"bowl", "spread_points", "heldout/line_fit", "heldout/wave_fit"}  # one per task
    assert json.loads(result.artifacts["best_scores"]) == {"bowl": 0.5, "spread_points": 0.5}
    assert "line_fit" not in result.artifacts["tasks"] and "wave_fit" not in result.artifacts["tasks"]


def test_self_feedback_hides_the_heldout_figures() -> None:
    result = EvalResult(status="ok", score=0.3, metrics={
        "bowl": 0.2, "spread_points": 0.4, "heldout/line_fit": 1.0, "heldout/wave_fit": 0.9}, artifacts={"tasks": "bowl: 0.1 -> 0.5"})
    fb = self_feedback(result)
    assert fb["tasks"] == {"bowl": 0.2, "spread_points": 0.4}
    assert not [k for k in fb["metrics"] if "heldout" in k]
    assert fb["score"] == 0.3 and "bowl" in fb["feedback"]
    assert self_feedback(None)["score"] is None


class _Store:
    def __init__(self, rows: list[tuple[Program, EvalResult]]) -> None:
        self.rows = rows

    def iter_evaluated(self, run_id: str):
        return ((i, p, r) for i, (p, r) in enumerate(self.rows))


def _agent(op: str, score: float | None, heldout: float, status: str = "ok") -> tuple[Program, EvalResult]:
    return (Program(code=f"# {op} {score} {heldout}", operator=op),
            EvalResult(status=status, score=score, metrics={"heldout/a": heldout, "heldout/b": heldout}))


def _draws(values: dict[str, list[float]], calls: list[list[tuple[str, int]]]):
    """A rescore that answers each agent's draws from ``values`` (keyed by its code) and records
    what it was asked."""
    def rescore(jobs: list[tuple[str, int]]) -> list[float]:
        calls.append(list(jobs))
        return [values[code][d - 1] for code, d in jobs]

    return rescore


def test_the_verdict_is_best_minus_seed_with_an_interval_over_draws() -> None:
    seed, best = _agent("seed", 0.1, 0.20), _agent("self", 0.3, 0.50)
    rows = [seed, best, _agent("self", 0.2, 0.9), _agent("self", None, 0.0, status="error")]
    calls: list[list[tuple[str, int]]] = []
    rescore = _draws({best[0].code: [0.52, 0.48, 0.51, 0.49], seed[0].code: [0.21, 0.19, 0.22, 0.18]}, calls)
    cmp = heldout_comparison(_Store(rows), "r", draws=5, rescore=rescore)
    assert cmp is not None and cmp.best_id == best[0].id  # the best by score, not by held-out
    assert calls == [[(best[0].code, d) for d in range(1, 5)] + [(seed[0].code, d) for d in range(1, 5)]]
    assert cmp.best_draws == (0.5, 0.52, 0.48, 0.51, 0.49) and cmp.seed_draws == (0.2, 0.21, 0.19, 0.22, 0.18)
    d = cmp.difference
    assert d is not None and abs(d.estimate - 0.3) < 1e-12 and 0 < d.lo < 0.3 < d.hi
    assert cmp.beats_seed is True
    text = cmp.verdict()
    assert text.startswith(f"best − seed agent: +0.3000, 90 % interval [{d.lo:+.4f}, {d.hi:+.4f}] over 5 draws "
                           "each: beyond noise (best 0.5000, seed 0.2000;"), text
    assert "%" not in text.replace("90 %", "")  # a difference, never a percentage of the seed's figure


def test_a_difference_inside_the_noise_is_called_so_and_does_not_beat_the_seed() -> None:
    seed, best = _agent("seed", 0.01, 0.02), _agent("self", 0.3, 0.05)
    rescore = _draws({best[0].code: [0.0, 0.04, 0.01], seed[0].code: [0.06, 0.0, 0.03]}, [])
    cmp = heldout_comparison(_Store([seed, best]), "r", draws=4, rescore=rescore)
    assert cmp is not None and cmp.difference is not None and cmp.difference.within_noise is True
    assert cmp.beats_seed is False
    assert ": within noise (best 0.0250, seed 0.0275;" in cmp.verdict(), cmp.verdict()


def test_the_seed_agent_alone_and_a_single_draw() -> None:
    seed = _agent("seed", 0.1, 0.2)
    calls: list[list[tuple[str, int]]] = []
    alone = heldout_comparison(_Store([seed]), "r", draws=3, rescore=_draws({seed[0].code: [0.1, 0.3]}, calls))
    assert calls == [[(seed[0].code, 1), (seed[0].code, 2)]]  # one agent: scored once per draw
    assert alone is not None and alone.difference is None and alone.beats_seed is None
    text = alone.verdict()
    assert text.startswith("seed agent alone (no child agent evaluated): held-out 0.2000, 90 % interval [0.1"), text
    assert text.endswith("over 3 draws (mean normalised improvement on a, b)")
    kept = heldout_comparison(_Store([seed, _agent("self", 0.05, 0.9)]), "r", draws=3,
                              rescore=_draws({seed[0].code: [0.1, 0.3]}, []))
    assert kept is not None and kept.verdict().startswith(
        "the best agent is the seed agent (none of 1 child agents scored above it on the scoring tasks)")
    one = heldout_comparison(_Store([seed, _agent("self", 0.3, 0.5)]), "r")  # the stored draw only
    assert one is not None and one.verdict().startswith("best − seed agent: +0.3000 over 1 draws each: no interval")
    assert one.beats_seed is None
