"""qdevolve's own copies of the OpenEvolve and ShinkaEvolve example patterns, written small.

Each fixture reproduces one pattern those projects' examples rely on (not their files):
feature dimensions read from the evaluator's metrics, OpenEvolve's ``complexity`` /
``diversity`` built-ins, an ``EvaluationResult``-like return object, cascade stages, and a
ShinkaEvolve ``main(program_path, results_dir)`` evaluator writing ``metrics.json`` and
``correct.json``.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest

from qdevolve.db import LineageStore
from qdevolve.evolve.core.engine import Evolution
from qdevolve.evolve.setup.example import load_example

QDEVOLVE = [sys.executable, "-m", "qdevolve"]

SEED = '''"""Place three numbers; the evaluator scores how close they get to a target."""

# EVOLVE-BLOCK-START
A = 0.5
B = 2.0
C = 1.0
# EVOLVE-BLOCK-END


def values():
    return [A, B, C]
'''

# Metrics-as-features (as circle_packing_with_artifacts): the feature dimensions are plain
# metrics, and the result is an object with .metrics / .artifacts (OpenEvolve's EvaluationResult).
METRICS_EVALUATOR = '''import importlib.util


class Result:
    def __init__(self, metrics, artifacts):
        self.metrics = metrics
        self.artifacts = artifacts


def _load(path):
    spec = importlib.util.spec_from_file_location("cand", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def evaluate(program_path):
    a, b, c = _load(program_path).values()
    score = 1.0 / (1.0 + (a - 3) ** 2 + (b + 1) ** 2 + (c - 2) ** 2)
    metrics = {"combined_score": score, "spread": abs(a - b), "balance": abs(b - c)}
    if c > 1.0:  # some children omit a feature dimension: they cannot be placed
        del metrics["balance"]
    return Result(metrics, {"note": f"a={a} b={b} c={c}"})
'''

OPENEVOLVE_CONFIG = '''max_iterations: {iterations}
random_seed: 3
database:
  num_islands: 1
  feature_dimensions: {dims}
  feature_bins: 4
  archive_size: 9
  exploration_ratio: 0.3
  exploitation_ratio: 0.5
evaluator:
  timeout: 20
  parallel_evaluations: 1
'''

# The shape every OpenEvolve example's config.yaml has: an OpenAI-compatible server and its key
# from the environment, weighted models, the database, the evaluator and the system message.
OPENEVOLVE_LLM_CONFIG = '''# a config as OpenEvolve's examples write it
max_iterations: {iterations}
checkpoint_interval: 10
log_level: "INFO"
llm:
  api_base: "{api_base}"
  api_key: ${{{key_env}}}
  models:
    - name: "{model}"
      weight: 0.8
    - name: "{model}"
      weight: 0.2
  temperature: 0.7
  max_tokens: 2048
  timeout: 60
prompt:
  system_message: "You are an expert programmer. Move the three numbers towards their targets."
  num_top_programs: 2
  num_diverse_programs: 1
database:
  num_islands: 1
  archive_size: 20
  exploration_ratio: 0.2
  exploitation_ratio: 0.7
evaluator:
  timeout: 20
  cascade_evaluation: false
  parallel_evaluations: 1
diff_based_evolution: true
max_code_length: 10000
'''


def write(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


def run_example(directory: Path, db: Path, **overrides) -> tuple[Evolution, sqlite3.Connection]:
    ex = load_example(directory)
    cfg = ex.config.with_overrides(sandbox={"type": "local"}, **overrides)
    store = LineageStore(db, create=True)
    evo = Evolution.start(ex, cfg, store, progress=False)
    try:
        evo.summary_ = evo.run()
    finally:
        evo.close()
        store.close()
    return evo, sqlite3.connect(db)


@pytest.fixture
def seed_text() -> str:
    return SEED
