"""Outer-loop benchmark (issue: the outer loop).

1. Controller CPU time per evaluation, excluding the sandbox: the engine runs the real
   archive, selection, ``ast`` mutator and SQLite store, with an in-process sandbox plugin
   that returns a fixed result (so no subprocess cost is counted). Goal: <= 5 ms.
2. Evaluations/s at 1 and 2 workers with a trivial evaluator through the real sandbox.
3. Circle packing, 500 evaluations of the ``ast`` mutator, for ``map_elites``, ``islands``
   and ``dgm`` over 3 seeds: best score, QD-score and coverage.

1. and 2. are taken ``--repeats`` times (each repeat: 1., then 2. at 1 and at 2 workers, each
run on a fresh store); 3. is run once per seed (its units are the seeds). The raw file
``benchmarks/results/loop.json`` (``--raw NAME`` for another) holds every run's evaluations,
wall and CPU seconds and scores, and the goal of each row; it is rewritten after every repeat
and every circle-packing run. Its tables are rendered by ``benchmarks/reports/loop.py``.

    python benchmarks/bench_loop.py [--quick] [--repeats 3] [--raw loop]
    python benchmarks/bench_loop.py --cpu-only 1000      # only 1., once; one JSON line, no raw file
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from _raw import start_meta, write_raw  # noqa: E402

from qdevolve import registry  # noqa: E402
from qdevolve.db import LineageStore  # noqa: E402
from qdevolve.evolve.core.engine import Evolution  # noqa: E402
from qdevolve.evolve.setup.example import load_example  # noqa: E402
from qdevolve.types import EvalResult  # noqa: E402

TRIVIAL_SEED = "# EVOLVE-BLOCK-START\nA = 1.0\nB = 2.0\nC = A + B\n# EVOLVE-BLOCK-END\n"
TRIVIAL_EVAL = ("def evaluate(path):\n    ns = {}\n    exec(open(path).read(), ns)\n"
                "    return {'combined_score': -abs(ns['C'] - 10.0)}\n")
ARCHIVES = ("map_elites", "islands", "dgm")
GOALS: dict[str, list[dict[str, Any]]] = {
    "controller": [{"metric": "cpu_ms_per_eval", "op": "<=", "value": 5, "unit": "ms CPU"}],
    "throughput": [],
    "throughput:2": [{"metric": "speedup_vs_1_worker", "op": ">", "value": 1, "unit": "x"}],
    "circle_packing": [{"metric": "best_minus_seed_score", "op": ">", "value": 0, "unit": ""}],
}


@registry.sandbox("bench_inprocess_null")
class NullSandbox:
    """Returns a fixed result without running anything: isolates the controller's cost."""

    def __init__(self) -> None:
        self.calls = 0

    def evaluate(self, program, evaluator, limits=None, *, cascade_thresholds=None):
        self.calls += 1
        return EvalResult(status="ok", score=float(len(program.code) % 97) / 97.0,
                          features={"a": float(self.calls % 13), "b": float(len(program.code) % 11)})

    def close(self) -> None:
        pass


def _example(tmp: Path) -> Path:
    d = tmp / "trivial"
    d.mkdir(parents=True, exist_ok=True)
    (d / "initial_program.py").write_text(TRIVIAL_SEED)
    (d / "evaluator.py").write_text(TRIVIAL_EVAL)
    return d


def _run(example_dir: Path, db: Path, **overrides) -> tuple[Evolution, float, float]:
    ex = load_example(example_dir)
    cfg = ex.config.with_overrides(**overrides)
    store = LineageStore(db)
    evo = Evolution.start(ex, cfg, store, progress=False)
    c0, t0 = time.process_time(), time.perf_counter()
    evo.run()
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    evo.close()
    store.close()
    return evo, cpu, wall


def controller_cpu(tmp: Path, n: int) -> dict:
    ex = _example(tmp)
    archive = {"type": "map_elites", "feature_dimensions": ["a", "b"], "ranges": [[0, 13], [0, 11]], "bins": 8}
    evo, cpu, wall = _run(ex, tmp / "cpu.sqlite", iterations=n, workers=1, seed=0, archive=archive,
                          sandbox={"type": "bench_inprocess_null"}, max_duplicate_streak=100_000)
    n = evo.ledger.evaluated
    return {"evaluations": n, "cpu_s": round(cpu, 6), "wall_s": round(wall, 6),
            "cpu_ms_per_eval": 1000 * cpu / max(n, 1), "wall_ms_per_eval": 1000 * wall / max(n, 1)}


def throughput(tmp: Path, n: int, workers: int) -> dict:
    ex = _example(tmp)
    evo, cpu, wall = _run(ex, tmp / f"tp{workers}.sqlite", iterations=n, workers=workers, seed=0,
                          archive={"type": "dgm"}, max_duplicate_streak=100_000)
    return {"workers": workers, "sandbox": evo.plugins.sandbox_type, "evaluations": evo.ledger.evaluated,
            "wall_s": round(wall, 6), "cpu_s": round(cpu, 6)}


def circle_packing(tmp: Path, n: int, name: str, seed: int) -> dict:
    ex = ROOT / "examples" / "circle_packing"
    base = load_example(ex).config.archive
    spec = {"map_elites": base,
            "islands": {"type": "islands", "n_islands": 4, "migration_interval": 25, "inner": base},
            "dgm": {"type": "dgm"}}[name]
    evo, cpu, wall = _run(ex, tmp / f"cp-{name}-{seed}.sqlite", iterations=n, seed=seed, workers=2, archive=spec)
    st = evo.archive.stats()
    return {"archive": name, "seed": seed, "evaluations": evo.ledger.evaluated, "best": evo.ledger.best_score,
            "seed_score": evo.ledger.seed_score, "qd_score": st.get("qd_score"), "coverage": st.get("coverage"),
            "wall_s": round(wall, 6), "cpu_s": round(cpu, 6)}


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="Small budgets (smoke run).")
    ap.add_argument("--repeats", type=int, default=3, help="Times 1. and 2. are measured.")
    ap.add_argument("--raw", default="loop", help="Raw file name under benchmarks/results/.")
    ap.add_argument("--out", default=None, help=argparse.SUPPRESS)  # the markdown report is gone
    ap.add_argument("--cpu-only", type=int, default=None, metavar="N",
                    help="Only the controller-CPU measurement, N evaluations; prints one JSON line.")
    args = ap.parse_args()
    if args.out is not None:
        ap.error("--out: markdown is no longer written; the raw file is benchmarks/results/<--raw>.json and "
                 "benchmarks/report.py renders its tables")
    if args.cpu_only:
        with tempfile.TemporaryDirectory() as d:
            print(json.dumps(controller_cpu(Path(d), args.cpu_only)))
        return
    if args.repeats < 1:
        ap.error("--repeats must be >= 1")
    n_cpu, n_tp, n_cp, seeds = (100, 40, 60, [0]) if args.quick else (1000, 200, 500, [0, 1, 2])
    meta = start_meta()
    settings = {"quick": args.quick, "repeats": args.repeats, "controller_evaluations": n_cpu,
                "throughput_evaluations": n_tp, "circle_packing_evaluations": n_cp, "circle_packing_workers": 2,
                "seeds": seeds, "archives": list(ARCHIVES)}
    data: dict[str, Any] = {"settings": settings, "controller": [], "throughput": [], "circle_packing": []}

    def save() -> None:
        write_raw(args.raw, data, seeds=seeds, meta=meta)

    with tempfile.TemporaryDirectory() as d:
        for k in range(args.repeats):
            rd = Path(d) / f"repeat{k}"
            c = controller_cpu(rd / "cpu", n_cpu)
            data["controller"].append({"repeat": k, **{x: c[x] for x in ("evaluations", "cpu_s", "wall_s")},
                                       "loadavg": _load(), "goals": GOALS["controller"]})
            for w in (1, 2):
                t = throughput(rd / f"tp{w}", n_tp, w)
                data["throughput"].append({"repeat": k, **t, "loadavg": _load(),
                                           "goals": GOALS.get(f"throughput:{w}", GOALS["throughput"])})
            print(json.dumps({"repeat": k, "controller": data["controller"][-1]["cpu_s"],
                              "throughput": [t["wall_s"] for t in data["throughput"][-2:]]}), flush=True)
            save()
        for name in ARCHIVES:
            for seed in seeds:
                r = circle_packing(Path(d), n_cp, name, seed)
                data["circle_packing"].append({**r, "loadavg": _load(), "goals": GOALS["circle_packing"]})
                print(json.dumps(data["circle_packing"][-1]), flush=True)
                save()
    sys.path.insert(0, str(ROOT / "benchmarks" / "reports"))
    from loop import render  # the tables BENCHMARKS.md shows

    out = render(json.loads((ROOT / "benchmarks" / "results" / f"{args.raw}.json").read_text()))
    print("\n\n".join(out.values()))


if __name__ == "__main__":
    main()
