"""Controller CPU per evaluation with and without the compatibility paths (budget meter,
features read from metrics, OpenEvolve's complexity / code_diversity built-ins).

    PYTHONPATH=. python benchmarks/bench_compat.py [--iterations 40] [--repeats 3]

Runs the tiny example of the engine tests with the offline ``ast`` mutator and the ``local``
sandbox, alternating the two configurations, and reports the controller process's own CPU
seconds (``RUSAGE_SELF``: the sandboxes are child processes and not counted) per evaluation.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from pathlib import Path

from qdevolve.db import LineageStore
from qdevolve.evolve.core.engine import Evolution
from qdevolve.evolve.setup.example import load_example

SEED = "# EVOLVE-BLOCK-START\nA = 0.5\nB = 2.0\n# EVOLVE-BLOCK-END\n\n\ndef value():\n    return -(A - 3) ** 2 - (B + 1) ** 2\n"
EVALUATOR = '''import importlib.util


def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("cand", program_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return {"combined_score": float(mod.value()), "a": float(mod.A), "b": float(mod.B)}
'''
BASE = {"archive": {"type": "map_elites", "feature_dimensions": ["code_length", "diversity"], "bins": 5}}
COMPAT = {"archive": {"type": "map_elites", "feature_dimensions": ["a", "complexity", "code_diversity"], "bins": 5},
          "budget": {"max_tokens": 10**9, "max_cost": 1e9, "prices": {"m": {"input": 1.0, "output": 1.0}}}}


def one(root: Path, cfg_extra: dict, iterations: int, tag: str) -> float:
    import yaml

    d = root / tag
    d.mkdir()
    (d / "initial_program.py").write_text(SEED)
    (d / "evaluator.py").write_text(EVALUATOR)
    (d / "config.yaml").write_text(yaml.safe_dump({"run": {"iterations": iterations, "workers": 2, "seed": 1},
                                                   "sandbox": {"type": "local"}, **cfg_extra}))
    ex = load_example(d)
    store = LineageStore(d / "run.sqlite", create=True)
    t0 = resource.getrusage(resource.RUSAGE_SELF)
    evo = Evolution.start(ex, ex.config, store, progress=False)
    summary = evo.run()
    evo.close()
    t1 = resource.getrusage(resource.RUSAGE_SELF)
    store.close()
    cpu = (t1.ru_utime - t0.ru_utime) + (t1.ru_stime - t0.ru_stime)
    return cpu / max(summary.evaluations, 1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    base, compat = [], []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for i in range(args.repeats):
            base.append(one(root, BASE, args.iterations, f"base{i}"))
            compat.append(one(root, COMPAT, args.iterations, f"compat{i}"))
    print(f"{time.strftime('%H:%M:%S')} controller CPU per evaluation (ms), median of {args.repeats}: "
          f"native {1e3 * statistics.median(base):.2f}, compat paths {1e3 * statistics.median(compat):.2f} "
          f"(ratio {statistics.median(compat) / statistics.median(base):.2f})")


if __name__ == "__main__":
    main()
