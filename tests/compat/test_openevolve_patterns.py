"""OpenEvolve example patterns run unmodified: features from metrics, built-ins, cascade."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from qdevolve.archive.features import FeatureExtractor, UnplaceableResult, fast_code_diversity
from qdevolve.evolve.setup.config import parse_config
from qdevolve.evolve.setup.example import load_example
from qdevolve.selection.openevolve_mix import OpenEvolveSelection
from qdevolve.types import Elite, EvalResult, Program

from .conftest import METRICS_EVALUATOR, OPENEVOLVE_CONFIG, SEED, run_example, write


def test_feature_dimensions_from_metrics_and_unplaceable_children(tmp_path: Path) -> None:
    ex = write(tmp_path / "metrics", {
        "initial_program.py": SEED, "evaluator.py": METRICS_EVALUATOR,
        "config.yaml": OPENEVOLVE_CONFIG.format(iterations=14, dims='["spread", "balance"]')})
    evo, con = run_example(ex, tmp_path / "m.sqlite")
    rows = con.execute("SELECT p.operator, e.status, e.error FROM programs p JOIN evaluations e "
                       "ON e.program_id = p.id").fetchall()
    assert len(rows) == 15, "the seed and every child are stored: no child can end the run"
    unplaced = [r for r in rows if r[1] == "invalid" and "balance" in (r[2] or "")]
    placed = [r for r in rows if r[1] == "ok"]
    assert unplaced, "a child without the 'balance' metric is stored invalid with the reason"
    assert all("archive:" in r[2] for r in unplaced)
    assert len(placed) >= 3
    feats = [json.loads(f) for (f,) in con.execute(
        "SELECT features FROM evaluations WHERE status = 'ok'")]
    assert all(set(f) == {"spread", "balance"} or f == {} for f in feats)
    elites = evo.archive.elites()
    assert elites and all(set(e.features) == {"spread", "balance"} for e in elites)
    assert evo.summary_.stop_reason == "budget"


def test_complexity_and_diversity_builtins_as_openevolve(tmp_path: Path) -> None:
    evaluator = METRICS_EVALUATOR.replace('    if c > 1.0:', '    if False:')
    ex = write(tmp_path / "kmod", {
        "initial_program.py": SEED, "evaluator.py": evaluator,
        "config.yaml": OPENEVOLVE_CONFIG.format(iterations=8, dims='["complexity", "diversity"]')})
    cfg = load_example(ex).config
    assert cfg.archive["feature_dimensions"] == ["complexity", "code_diversity"]
    assert cfg.archive["bins"] == 4, "archive_size 9 over 2 dims needs 3 bins; feature_bins 4 wins"
    assert cfg.selection == {"type": "openevolve", "exploration_ratio": 0.3, "exploitation_ratio": 0.5,
                             "archive_size": 9}
    evo, con = run_example(ex, tmp_path / "k.sqlite")
    codes = dict(con.execute("SELECT id, code FROM programs"))
    for e in evo.archive.elites():
        assert e.features["complexity"] == len(codes[e.program_id])
        assert e.features["code_diversity"] >= 0.0


def test_builtin_formulas() -> None:
    assert fast_code_diversity("ab\n", "ab\n") == 0.0
    # len diff 3 -> 0.3; line diff 1 -> 10; chars {c} -> 0.5
    assert fast_code_diversity("ab\n", "abcc\n\n") == pytest.approx(0.3 + 10 + 0.5)
    fx = FeatureExtractor(["complexity", "score", "m"])
    prog = Program(code="x = 1\n")
    out = fx(prog, EvalResult(status="ok", score=0.5, metrics={"m": 2.0}))
    assert out == {"complexity": 6.0, "score": 0.5, "m": 2.0}
    with pytest.raises(UnplaceableResult, match="'m'"):
        fx(prog, EvalResult(status="ok", score=0.5))
    with pytest.raises(UnplaceableResult, match="not finite"):
        fx(prog, EvalResult(status="ok", score=0.5, features={"m": float("inf")}))


def test_openevolve_selection_mixture() -> None:
    rule = OpenEvolveSelection(exploration_ratio=0.2, exploitation_ratio=0.6, archive_size=2)
    cands = [Elite(program_id=str(i), score=float(s), features={}) for i, s in enumerate([0.1, 0.9, 0.5, 0.3])]
    p = rule.probabilities(cands)
    assert p == pytest.approx([0.1, 0.4, 0.4, 0.1])
    draws = rule.select(cands, np.random.default_rng(0), n=4000)
    freq = np.bincount([int(e.program_id) for e in draws], minlength=4) / 4000
    assert np.abs(freq - p).max() < 0.05
    with pytest.raises(Exception, match="<= 1"):
        OpenEvolveSelection(exploration_ratio=0.6, exploitation_ratio=0.6)


CASCADE_EVALUATOR = '''import importlib.util


def _a(path):
    spec = importlib.util.spec_from_file_location("cand", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.values()[0]


def evaluate_stage1(program_path):
    return {"combined_score": 0.9, "stage1_ran": 1.0}


def evaluate_stage2(program_path):
    return {"combined_score": 1.0 / (1.0 + abs(_a(program_path) - 3)), "stage2_ran": 1.0}


def evaluate(program_path):
    return {"combined_score": 0.0, "plain_evaluate_ran": 1.0}
'''


@pytest.mark.parametrize("config, stage", [
    (None, "2"),                                                     # native default: on
    ("max_iterations: 2\nevaluator:\n  cascade_thresholds: [1.3]\n", "1"),  # 0.9 < 1.3: stops
    ("max_iterations: 2\nevaluator:\n  cascade_evaluation: false\n", None),  # off: evaluate()
])
def test_cascade_on_by_default(tmp_path: Path, config: str | None, stage: str | None) -> None:
    files = {"initial_program.py": SEED, "evaluator.py": CASCADE_EVALUATOR}
    if config:
        files["config.yaml"] = config
    ex = write(tmp_path / "cascade", files)
    evo, con = run_example(ex, tmp_path / "c.sqlite", iterations=2, workers=1,
                           archive={"type": "map_elites", "feature_dimensions": ["complexity"]})
    arts = [json.loads(a) for (a,) in con.execute("SELECT artifacts FROM evaluations")]
    metrics = [json.loads(m) for (m,) in con.execute("SELECT metrics FROM evaluations")]
    assert len(arts) == 3
    if stage is None:
        assert all("plain_evaluate_ran" in m for m in metrics)
    else:
        assert all(a.get("cascade_stage") == stage for a in arts)
        assert all("plain_evaluate_ran" not in m for m in metrics)


def test_openevolve_config_maps_cascade_and_phase_configs(tmp_path: Path) -> None:
    cfg = parse_config({"max_iterations": 5, "evaluator": {"cascade_thresholds": [1.3]}})
    assert cfg.evaluator["cascade_thresholds"] == [1.3]
    assert parse_config({"max_iterations": 5}).evaluator["cascade_thresholds"] == [0.5, 0.75, 0.9]
    # Phase configs (config_phase_1.yaml, ...) are chosen with --config; here through load_example.
    ex = write(tmp_path / "phases", {"initial_program.py": SEED, "evaluator.py": METRICS_EVALUATOR,
                                     "config_phase_2.yaml": "max_iterations: 77\nrandom_seed: 5\n"})
    ex2 = load_example(ex, config_path=ex / "config_phase_2.yaml")
    assert ex2.config.iterations == 77 and ex2.config.seed == 5


def test_code_diversity_matches_installed_openevolve() -> None:
    """Parity with OpenEvolve's own implementation (the ``bench`` extra installs it)."""
    database = pytest.importorskip("openevolve.database")
    config = pytest.importorskip("openevolve.config")
    db = database.ProgramDatabase(config.DatabaseConfig())
    rng = np.random.default_rng(1)
    alphabet = list("abcdefgh \n=+()0123456789")
    for _ in range(50):
        a = "".join(rng.choice(alphabet, size=int(rng.integers(0, 80))))
        b = "".join(rng.choice(alphabet, size=int(rng.integers(0, 80))))
        assert fast_code_diversity(a, b) == pytest.approx(db._fast_code_diversity(a, b))


def test_a_seed_that_cannot_be_placed_stops_the_start_and_stores_nothing(tmp_path: Path) -> None:
    from qdevolve.db import LineageStore
    from qdevolve.errors import QdevolveError
    from qdevolve.evolve.core.engine import Evolution

    ex = write(tmp_path / "noplace", {"initial_program.py": SEED, "evaluator.py": METRICS_EVALUATOR})
    example = load_example(ex)
    cfg = example.config.with_overrides(sandbox={"type": "local"},
                                        archive={"type": "map_elites", "feature_dimensions": ["missing_metric"]})
    store = LineageStore(tmp_path / "n.sqlite", create=True)
    with pytest.raises(QdevolveError, match="missing_metric"):
        Evolution.start(example, cfg, store, progress=False)
    assert store.list_runs() == [], "no half-made run"
    store.close()
