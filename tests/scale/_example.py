"""A small example directory for the end-to-end scale tests (a real evaluator, a fixed sleep)."""

from __future__ import annotations

from pathlib import Path

SEED = '''\
# EVOLVE-BLOCK-START
A = 1.0
B = 2.0
C = 3.0


def value():
    return A * 0.5 + B * 0.25 - abs(C - 2.5)
# EVOLVE-BLOCK-END
'''

EVALUATOR = '''\
import importlib.util
import math
import time

SLEEP = {sleep}


def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("candidate", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    v = float(module.value())
    time.sleep(SLEEP)  # stands in for an expensive evaluation
    if not math.isfinite(v):
        return {{"combined_score": 0.0, "a": 0.0, "b": 0.0}}
    return {{"combined_score": v, "a": min(9.9, abs(float(module.A))), "b": min(9.9, abs(float(module.B)))}}
'''

CONFIG = '''\
run:
  iterations: {iterations}
  seed: {seed}
  workers: 2
archive:
  type: map_elites
  feature_dimensions: [a, b]
  ranges: [[0.0, 10.0], [0.0, 10.0]]
  bins: 5
sandbox: local
limits:
  wall_s: 30
'''


def write_example(root: Path, *, iterations: int, sleep: float, seed: int = 0, extra: str = "") -> Path:
    """``root/example`` with ``initial_program.py``, ``evaluator.py`` and ``config.yaml``
    (``extra``: more lines for the config's ``run:`` section, indented by two spaces)."""
    d = root / "example"
    d.mkdir(parents=True, exist_ok=True)
    (d / "initial_program.py").write_text(SEED)
    (d / "evaluator.py").write_text(EVALUATOR.format(sleep=sleep))
    config = CONFIG.format(iterations=iterations, seed=seed)
    if extra:
        config = config.replace("  workers: 2\n", "  workers: 2\n" + extra)
    (d / "config.yaml").write_text(config)
    return d
