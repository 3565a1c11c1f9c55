"""Outer-loop benchmark (issue: the outer loop).

1. Controller CPU time per evaluation, excluding the sandbox: the engine runs the real
   archive, selection, ``ast`` mutator and SQLite store, with an in-process sandbox plugin
   that returns a fixed result (so no subprocess cost is counted). Goal: <= 5 ms.
2. Evaluations/s at 1 and 2 workers with a trivial evaluator through the real sandbox.
3. Circle packing, 500 evaluations of the ``ast`` mutator, for ``map_elites``, ``islands``
   and ``dgm`` over 3 seeds: best score, QD-score and coverage.

    python benchmarks/bench_loop.py [--quick] [--out benchmarks/results/loop.md]
    python benchmarks/bench_loop.py --cpu-only 1000      # only 1., one JSON line
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from qdevolve import registry
from qdevolve.db import LineageStore
from qdevolve.evolve.core.engine import Evolution
from qdevolve.evolve.setup.example import load_example
from qdevolve.types import EvalResult

ROOT = Path(__file__).resolve().parents[1]
TRIVIAL_SEED = "# EVOLVE-BLOCK-START\nA = 1.0\nB = 2.0\nC = A + B\n# EVOLVE-BLOCK-END\n"
TRIVIAL_EVAL = ("def evaluate(path):\n    ns = {}\n    exec(open(path).read(), ns)\n"
                "    return {'combined_score': -abs(ns['C'] - 10.0)}\n")


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
    return {"evaluations": n, "cpu_ms_per_eval": 1000 * cpu / max(n, 1), "wall_ms_per_eval": 1000 * wall / max(n, 1)}


def throughput(tmp: Path, n: int, workers: int) -> dict:
    ex = _example(tmp)
    evo, cpu, wall = _run(ex, tmp / f"tp{workers}.sqlite", iterations=n, workers=workers, seed=0,
                          archive={"type": "dgm"}, max_duplicate_streak=100_000)
    n = evo.ledger.evaluated
    return {"workers": workers, "sandbox": evo.plugins.sandbox_type, "evaluations": n,
            "evals_per_s": n / wall, "controller_cpu_ms_per_eval": 1000 * cpu / max(n, 1)}


def circle_packing(tmp: Path, n: int, seeds: list[int]) -> list[dict]:
    ex = ROOT / "examples" / "circle_packing"
    base = load_example(ex).config.archive
    archives = {"map_elites": base,
                "islands": {"type": "islands", "n_islands": 4, "migration_interval": 25, "inner": base},
                "dgm": {"type": "dgm"}}
    rows = []
    for name, spec in archives.items():
        for seed in seeds:
            evo, cpu, wall = _run(ex, tmp / f"cp-{name}-{seed}.sqlite", iterations=n, seed=seed, workers=2,
                                  archive=spec)
            st = evo.archive.stats()
            rows.append({"archive": name, "seed": seed, "best": evo.ledger.best_score,
                         "seed_score": evo.ledger.seed_score,
                         "qd_score": st.get("qd_score"), "coverage": st.get("coverage"), "wall_s": wall})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="Small budgets (smoke run).")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "loop.md"))
    ap.add_argument("--cpu-only", type=int, default=None, metavar="N",
                    help="Only the controller-CPU measurement, N evaluations; prints one JSON line.")
    args = ap.parse_args()
    console = Console()
    if args.cpu_only:
        import json

        with tempfile.TemporaryDirectory() as d:
            print(json.dumps(controller_cpu(Path(d), args.cpu_only)))
        return
    n_cpu, n_tp, n_cp, seeds = (100, 40, 60, [0]) if args.quick else (1000, 200, 500, [0, 1, 2])
    lines = [f"# bench_loop ({time.strftime('%Y-%m-%d')})", "",
             f"Command: `python benchmarks/bench_loop.py{' --quick' if args.quick else ''}` on 2 cores.", ""]
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        c = controller_cpu(tmp, n_cpu)
        t = Table(title="controller cost per evaluation (in-process null sandbox)")
        for col in ("evaluations", "CPU ms / eval", "wall ms / eval", "goal"):
            t.add_column(col)
        t.add_row(str(c["evaluations"]), f"{c['cpu_ms_per_eval']:.2f}", f"{c['wall_ms_per_eval']:.2f}", "<= 5 ms CPU")
        console.print(t)
        lines += ["| evaluations | controller CPU ms / eval | wall ms / eval | goal |", "|---|---|---|---|",
                  f"| {c['evaluations']} | {c['cpu_ms_per_eval']:.2f} | {c['wall_ms_per_eval']:.2f} | <= 5 ms |", ""]
        tps = [throughput(tmp, n_tp, w) for w in (1, 2)]
        t = Table(title="trivial evaluator through the real sandbox")
        for col in ("workers", "sandbox", "evaluations", "evals/s", "controller CPU ms / eval"):
            t.add_column(col)
        lines += ["| workers | sandbox | evaluations | evals/s | controller CPU ms / eval |", "|---|---|---|---|---|"]
        for r in tps:
            t.add_row(str(r["workers"]), r["sandbox"], str(r["evaluations"]), f"{r['evals_per_s']:.1f}",
                      f"{r['controller_cpu_ms_per_eval']:.2f}")
            lines.append(f"| {r['workers']} | {r['sandbox']} | {r['evaluations']} | {r['evals_per_s']:.1f} | "
                         f"{r['controller_cpu_ms_per_eval']:.2f} |")
        console.print(t)
        lines += ["", f"Speed-up 2 vs 1 workers: {tps[1]['evals_per_s'] / tps[0]['evals_per_s']:.2f}x", ""]
        rows = circle_packing(tmp, n_cp, seeds)
    t = Table(title=f"circle packing, {n_cp} evaluations of the ast mutator")
    for col in ("archive", "seeds", "best (mean ± sd)", "QD-score (mean)", "coverage (mean)", "seed score"):
        t.add_column(col)
    lines += [f"Circle packing, {n_cp} evaluations of `ast`, seeds {seeds}:", "",
              "| archive | best (mean ± sd) | best per seed | QD-score (mean) | coverage (mean) |", "|---|---|---|---|---|"]
    for name in ("map_elites", "islands", "dgm"):
        rs = [r for r in rows if r["archive"] == name]
        best = [r["best"] for r in rs]
        sd = statistics.pstdev(best) if len(best) > 1 else 0.0
        qd = statistics.fmean(r["qd_score"] or 0.0 for r in rs)
        cov = [r["coverage"] for r in rs if isinstance(r["coverage"], (int, float))]
        cov_s = f"{100 * statistics.fmean(cov):.1f} %" if cov else "n/a"
        t.add_row(name, str(len(rs)), f"{statistics.fmean(best):.4f} ± {sd:.4f}", f"{qd:.2f}", cov_s,
                  f"{rs[0]['seed_score']:.4f}")
        lines.append(f"| {name} | {statistics.fmean(best):.4f} ± {sd:.4f} | "
                     f"{', '.join(f'{b:.4f}' for b in best)} | {qd:.2f} | {cov_s} |")
    console.print(t)
    lines += ["", f"Seed score: {rows[0]['seed_score']:.4f}. QD-score = sum of elite scores (offset 0); "
              "dgm keeps every valid program, so its QD-score sums the whole archive and its coverage is not a grid fraction."]
    Path(args.out).write_text("\n".join(lines) + "\n")
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
