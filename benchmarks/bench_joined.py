"""The joined system on ``examples/expr_evolution``: does training the mutation policy with a
diversity-preserving objective keep the archive filling?

Same evaluation budget and seeds for every arm: the frozen base policy (no trainer steps),
and the policy trained while evolving with ``grpo``, ``ips``, ``rare`` and ``vpo``. For
each run the archive is replayed from the lineage database and, against evaluations, we
record the best score, QD-score, coverage and the number of distinct correct programs
(normalised code with every visible test passing). Writes a table, a PNG plot and
``benchmarks/results/joined.md``.

    python benchmarks/bench_joined.py [--budget 192] [--seeds 0,1,2] [--every 32]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "expr_evolution"
ARMS = {
    "frozen base": ["--train-objective", "grpo", "--train-every", "1000000"],
    "grpo": ["--train-objective", "grpo"],
    "ips": ["--train-objective", "ips"],
    "rare": ["--train-objective", "rare", "--objective-arg", "alpha=1.0"],
    "vpo": ["--train-objective", "vpo", "--objective-arg", "m=1"],
}


def curves(db: Path, every: int = 16) -> dict[str, list[float]]:
    """Replay the run's archive and sample best / QD-score / coverage / distinct correct."""
    from qdevolve import registry
    from qdevolve.db import open_store

    store = open_store(db)
    run_id = store.latest_run_id()
    archive = registry.archive.create(store.get_run(run_id)["config"]["archive"])
    out: dict[str, list[float]] = {"evaluations": [], "best": [], "qd_score": [], "coverage": [], "distinct_correct": []}
    correct: set[str] = set()
    best = float("-inf")
    n = 0
    for _seq, prog, res in store.iter_evaluated(run_id):
        archive.add(prog, res)
        n += 1
        if res.ok and res.score is not None:
            best = max(best, res.score)
            if res.score >= 1.0 and prog.operator != "seed":
                correct.add(prog.code_hash)
        if n % every == 0:
            st = archive.stats()
            out["evaluations"].append(n)
            out["best"].append(best)
            out["qd_score"].append(float(st.get("qd_score") or 0.0))
            out["coverage"].append(float(st.get("coverage") or 0.0))
            out["distinct_correct"].append(float(len(correct)))
    store.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budget", type=int, default=320)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--every", type=int, default=16, help="trainer step every N evaluations")
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "joined.md"))
    ap.add_argument("--plot", default=str(ROOT / "benchmarks" / "results" / "joined.png"))
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    arms = [a.strip() for a in args.arms.split(",")]
    results: dict[str, list[dict[str, list[float]]]] = {a: [] for a in arms}
    with tempfile.TemporaryDirectory() as d:
        for arm in arms:
            for seed in seeds:
                db = Path(d) / f"{arm.replace(' ', '_')}-{seed}.sqlite"
                flags = list(ARMS[arm])
                if "--train-every" not in flags:
                    flags += ["--train-every", str(args.every)]
                cmd = [sys.executable, "-m", "qdevolve", "run", str(EXAMPLE), "--db", str(db), "--iterations",
                       str(args.budget), "--seed", str(seed), "--no-progress", *flags]
                t0 = time.time()
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
                if r.returncode != 0:
                    raise SystemExit(f"{arm} seed {seed} failed:\n{r.stderr[-3000:]}")
                c = curves(db)
                c["wall_s"] = [time.time() - t0]
                results[arm].append(c)
                print(f"{arm:12s} seed {seed}: best {c['best'][-1]:.3f} qd {c['qd_score'][-1]:.2f} "
                      f"coverage {c['coverage'][-1]:.3f} distinct correct {c['distinct_correct'][-1]:.0f} "
                      f"({c['wall_s'][0]:.0f} s)", flush=True)
    _report(results, args, seeds)


def _report(results: dict, args: argparse.Namespace, seeds: list[int]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from rich.console import Console
    from rich.table import Table

    cols = ("arm", "best", "QD-score", "coverage", "distinct correct", "distinct correct per seed")
    t = Table(title=f"expr_evolution, {args.budget} evaluations, seeds {seeds} (mean over seeds)")
    for c in cols:
        t.add_column(c)
    lines = [f"# bench_joined ({time.strftime('%Y-%m-%d')})", "",
             f"Command: `python benchmarks/bench_joined.py --budget {args.budget} --seeds {args.seeds} "
             f"--every {args.every}` (2 cores, CPU, tiny expr_dsl policy).", "",
             "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for arm, runs in results.items():
        def final(key: str, runs: list = runs) -> list[float]:
            return [r[key][-1] for r in runs]
        vals = (arm, f"{statistics.fmean(final('best')):.3f}", f"{statistics.fmean(final('qd_score')):.2f}",
                f"{100 * statistics.fmean(final('coverage')):.1f} %", f"{statistics.fmean(final('distinct_correct')):.1f}",
                ", ".join(f"{v:.0f}" for v in final("distinct_correct")))
        t.add_row(*vals)
        lines.append("| " + " | ".join(vals) + " |")
    Console().print(t)
    fig, axes = plt.subplots(1, 4, figsize=(18, 4))
    for ax, key, label in zip(axes, ("best", "qd_score", "coverage", "distinct_correct"),
                              ("best score", "QD-score", "coverage", "distinct correct programs"), strict=False):
        for arm, runs in results.items():
            xs = runs[0]["evaluations"]
            m = min(len(r[key]) for r in runs)
            ys = [statistics.fmean(r[key][i] for r in runs) for i in range(m)]
            ax.plot(xs[:m], ys, label=arm)
        ax.set_xlabel("evaluations")
        ax.set_title(label)
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(args.plot, dpi=110)
    lines += ["", f"![joined]({Path(args.plot).name})"]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out} and {args.plot}")


if __name__ == "__main__":
    main()
