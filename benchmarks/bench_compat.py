"""Controller CPU per evaluation with and without the compatibility paths (budget meter,
features read from metrics, OpenEvolve's complexity / code_diversity built-ins).

    python benchmarks/bench_compat.py [--iterations 40] [--repeats 3] [--seed 1] [--raw compat]

Runs the tiny example of the engine tests with the offline ``ast`` mutator and the ``local``
sandbox, the two configurations back to back in each repeat (repeat ``i`` runs both on run seed
``--seed + i``; the native config first in even repeats, second in odd ones, after one unrecorded
warm-up pair that pays the first-time imports), and records per run the controller process's own
CPU seconds (``RUSAGE_SELF``: the sandboxes are child processes and not counted), the evaluations
and the wall seconds.

Raw file: ``benchmarks/results/compat.json`` (``--raw NAME`` for another), written after every
repeat; its table is rendered by ``benchmarks/reports/compat.py``.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _raw import start_meta, write_raw  # noqa: E402

from qdevolve.db import LineageStore  # noqa: E402
from qdevolve.evolve.core.engine import Evolution  # noqa: E402
from qdevolve.evolve.setup.example import load_example  # noqa: E402

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


CONFIGS = {"native": BASE, "compat": COMPAT}
WORKERS = 2


def one(root: Path, cfg_extra: dict, iterations: int, tag: str, seed: int) -> dict[str, Any]:
    """One run of the tiny example: the controller's CPU seconds, its evaluations and wall seconds."""
    import yaml

    d = root / tag
    d.mkdir()
    (d / "initial_program.py").write_text(SEED)
    (d / "evaluator.py").write_text(EVALUATOR)
    (d / "config.yaml").write_text(yaml.safe_dump({"run": {"iterations": iterations, "workers": WORKERS, "seed": seed},
                                                   "sandbox": {"type": "local"}, **cfg_extra}))
    ex = load_example(d)
    store = LineageStore(d / "run.sqlite", create=True)
    t0 = resource.getrusage(resource.RUSAGE_SELF)
    w0 = time.perf_counter()
    evo = Evolution.start(ex, ex.config, store, progress=False)
    summary = evo.run()
    evo.close()
    wall = time.perf_counter() - w0
    t1 = resource.getrusage(resource.RUSAGE_SELF)
    store.close()
    cpu = (t1.ru_utime - t0.ru_utime) + (t1.ru_stime - t0.ru_stime)
    return {"cpu_s": round(cpu, 5), "evaluations": summary.evaluations, "wall_s": round(wall, 4)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iterations", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1, help="run seed of the first repeat (repeat i: seed + i)")
    ap.add_argument("--raw", default="compat", help="raw file name under benchmarks/results/")
    args = ap.parse_args()
    if args.repeats < 1:
        ap.error("--repeats must be >= 1")
    meta = start_meta()
    settings = {"iterations": args.iterations, "repeats": args.repeats, "workers": WORKERS, "sandbox": "local",
                "mutator": "ast (offline)", "configs": CONFIGS, "reference": "native", "warmup_pairs": 1,
                "order": "native first in even repeats, compat first in odd ones",
                "cpu": "the controller process's own CPU seconds (RUSAGE_SELF) from starting the run to closing it"}
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for tag, extra in CONFIGS.items():  # warm-up, not recorded: first-time imports and caches
            one(root, extra, args.iterations, f"warmup-{tag}", args.seed)
        for i in range(args.repeats):
            seed = args.seed + i
            for tag in (list(CONFIGS) if i % 2 == 0 else list(CONFIGS)[::-1]):
                extra = CONFIGS[tag]
                runs.append({"repeat": i, "seed": seed, "config": tag,
                             **one(root, extra, args.iterations, f"{tag}{i}", seed)})
                r = runs[-1]
                print(f"{time.strftime('%H:%M:%S')} repeat {i} {tag:6}: {1e3 * r['cpu_s'] / max(r['evaluations'], 1):.2f} "
                      f"ms controller CPU per evaluation, {r['evaluations']} evaluations in {r['wall_s']:.1f} s", flush=True)
            path = write_raw(args.raw, {"settings": settings, "runs": runs}, seeds=[args.seed + k for k in range(i + 1)],
                             meta=meta)
    print(f"wrote {path}")
    sys.path.insert(0, str(ROOT / "benchmarks" / "reports"))
    from compat import render  # the table BENCHMARKS.md shows

    out = render(json.loads(path.read_text()))
    print(out["table"] + "\n\n" + out["summary"])


if __name__ == "__main__":
    main()
