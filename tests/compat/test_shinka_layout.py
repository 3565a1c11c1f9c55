"""ShinkaEvolve's layout: initial.<ext> + evaluate.py with main(program_path, results_dir)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from qdevolve.evolve.compat.shinka_compat import results_to_record
from qdevolve.evolve.setup.config import parse_config
from qdevolve.evolve.setup.example import load_example

from .conftest import QDEVOLVE, SEED, run_example, write

# A main() evaluator in ShinkaEvolve's style: it loads the program itself, writes
# metrics.json (combined_score, public, private, text_feedback) and correct.json.
SHINKA_EVALUATE = '''import argparse
import importlib.util
import json
import os

from scoring import TARGET  # a sibling module of evaluate.py, as ShinkaEvolve examples have


def main(program_path, results_dir):
    os.makedirs(results_dir, exist_ok=True)
    spec = importlib.util.spec_from_file_location("cand", program_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    a, b, c = mod.values()
    correct = a == 0.5  # children that move A are "incorrect"
    metrics = {
        "combined_score": 1.0 / (1.0 + (a - TARGET) ** 2 + (b + 1) ** 2),
        "public": {"distance_a": abs(a - 3), "label": "close" if abs(a - 3) < 1 else "far"},
        "private": {"secret_offset": 42.0},
        "text_feedback": "move A towards 3",
    }
    with open(os.path.join(results_dir, "metrics.json"), "w") as fh:
        json.dump(metrics, fh)
    with open(os.path.join(results_dir, "correct.json"), "w") as fh:
        json.dump({"correct": correct, "error": "" if correct else "A must stay at 0.5"}, fh)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--program_path", default="initial.py")
    parser.add_argument("--results_dir", default="results")
    args = parser.parse_args()
    main(args.program_path, args.results_dir)
'''

SHINKA_YAML = '''max_evaluation_jobs: 1
db_config:
  num_islands: 1
  parent_selection_strategy: power_law
  exploitation_alpha: 1.5
  num_top_k_inspirations: 1
  island_elitism: true
evo_config:
  num_generations: 10
  max_api_costs: 3.0
  language: python
  init_program_path: initial.py
'''


def test_shinka_main_evaluator_runs(tmp_path: Path) -> None:
    ex = write(tmp_path / "shinka", {"initial.py": SEED, "evaluate.py": SHINKA_EVALUATE, "scoring.py": "TARGET = 3.0\n"})
    example = load_example(ex)
    assert example.layout == "shinka" and example.seed_path.name == "initial.py"
    evo, con = run_example(ex, tmp_path / "s.sqlite", iterations=10, workers=1,
                           archive={"type": "map_elites", "feature_dimensions": ["distance_a"], "bins": 4})
    rows = con.execute("SELECT p.operator, e.status, e.score, e.metrics, e.artifacts, e.error FROM programs p "
                       "JOIN evaluations e ON e.program_id = p.id").fetchall()
    assert len(rows) == 11
    seed = next(r for r in rows if r[0] == "seed")
    assert seed[1] == "ok" and abs(seed[2] - 1.0 / (1.0 + 6.25 + 9.0)) < 1e-9
    metrics, artifacts = json.loads(seed[3]), json.loads(seed[4])
    assert metrics == {"distance_a": 2.5}, "public numbers become metrics"
    assert artifacts["private.secret_offset"] == "42.0", "private values become artifacts"
    assert artifacts["public.label"] == "far" and artifacts["text_feedback"] == "move A towards 3"
    incorrect = [r for r in rows if r[1] == "error" and "evaluator reported" in r[5]]
    assert incorrect and all("A must stay at 0.5" in r[5] for r in incorrect), "correct.json -> status"
    assert any(r[1] == "ok" and r[0] != "seed" for r in rows)


def test_private_artifacts_stay_out_of_prompts() -> None:
    from qdevolve.prompts.builder import render_artifacts
    from qdevolve.types import EvalResult

    res = EvalResult(status="ok", score=1.0, artifacts={"private.answer": "41", "text_feedback": "hint"})
    text = render_artifacts(res, {})
    assert "hint" in text and "41" not in text


def test_results_mapping() -> None:
    rec = results_to_record({"combined_score": 2.0, "public": {"x": 1}, "private": {"y": [1, 2]}, "runs": 3},
                            {"correct": True, "error": None})
    assert rec == {"x": 1.0, "runs": 3.0, "combined_score": 2.0, "artifacts": {"private.y": "[1, 2]"}}
    assert "error" in results_to_record(None, None)
    assert results_to_record({"combined_score": 0.0}, {"correct": False})["error"].startswith("correct.json")


def test_shinka_yaml_maps() -> None:
    import yaml

    cfg = parse_config(yaml.safe_load(SHINKA_YAML), where="shinka.yaml")
    assert cfg.iterations == 10 and cfg.workers == 1
    assert cfg.selection == {"type": "power_law", "alpha": 1.5}
    assert cfg.inspirations["n_best"] == 1
    assert cfg.budget == {"max_cost": 3.0, "prices": {}}
    assert len(cfg.warnings) == 1 and "island_elitism" in cfg.warnings[0]


def test_shinka_import_without_package_is_one_line(tmp_path: Path) -> None:
    evaluate = "from shinka.core import run_shinka_eval\n\n\ndef main(program_path, results_dir):\n    pass\n"
    ex = write(tmp_path / "needs_shinka", {"initial.py": SEED, "evaluate.py": evaluate})
    try:
        import shinka  # noqa: F401
    except ImportError:
        r = subprocess.run([*QDEVOLVE, "run", str(ex), "--db", str(tmp_path / "x.sqlite")],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 2
        assert r.stderr.count("\n") == 1 and "qdevolve[shinka]" in r.stderr
        assert not (tmp_path / "x.sqlite").exists()
