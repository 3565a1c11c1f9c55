"""Fixtures for engine tests: a tiny, fast example directory written into tmp_path."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

SEED = '''"""A tiny evolvable program: maximise f(a, b) = -(a - 3)^2 - (b + 1)^2."""

# EVOLVE-BLOCK-START
A = 0.5
B = 2.0
# EVOLVE-BLOCK-END


def value():
    return -(A - 3) ** 2 - (B + 1) ** 2
'''

EVALUATOR = '''import importlib.util


def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("cand", program_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    v = float(mod.value())
    return {"combined_score": v, "features": {"a": float(mod.A), "b": float(mod.B)},
            "tests": [1.0 if abs(mod.A - 3) < 1 else 0.0, 1.0 if abs(mod.B + 1) < 1 else 0.0]}
'''

CONFIG = '''run:
  iterations: 12
  seed: 7
  workers: 1
archive:
  type: map_elites
  feature_dimensions: [a, b]
  ranges: [[-10, 10], [-10, 10]]
  bins: 5
sandbox:
  type: local
limits:
  wall_s: 10
'''


def write_example(root: Path, *, seed: str = SEED, evaluator: str = EVALUATOR, config: str | None = CONFIG) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "initial_program.py").write_text(seed)
    (root / "evaluator.py").write_text(evaluator)
    if config is not None:
        (root / "config.yaml").write_text(config)
    return root


@pytest.fixture
def tiny_example(tmp_path: Path) -> Path:
    return write_example(tmp_path / "tiny")


QDEVOLVE = [sys.executable, "-m", "qdevolve"]
