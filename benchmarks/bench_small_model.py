"""Does a 135M model improve its seed? ``examples/small_model_knapsack`` on five run seeds.

Runs the example (its own config: the ``block`` operator with ``diff`` and ``rewrite``) for
``--iterations`` children on each run seed, with the ``openai`` backend against an
OpenAI-compatible server (llama.cpp's, serving SmolLM2-135M-Instruct), and records per seed
the seed program's score, the best score, whether it improved, the parse rate and tokens/s
rows of the run summary, and the wall time. Writes ``benchmarks/results/small_model.json``
and ``benchmarks/results/small_model.md``.

    python benchmarks/bench_small_model.py --url http://127.0.0.1:8791/v1 [--seeds 0 1 2 3 4] [--iterations 64]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_replies import run_info  # noqa: E402

from qdevolve.db import LineageStore  # noqa: E402
from qdevolve.errors import RunAborted  # noqa: E402
from qdevolve.evolve.core.engine import Evolution  # noqa: E402
from qdevolve.evolve.report import summarize  # noqa: E402
from qdevolve.evolve.setup.example import load_example  # noqa: E402

EXAMPLE = ROOT / "examples" / "small_model_knapsack"


def one_run(url: str, model: str, seed: int, iterations: int, workdir: Path) -> dict:
    ex = load_example(EXAMPLE)
    cfg = ex.config.with_overrides(iterations=iterations, seed=seed,
                                   backend={"type": "openai", "api_base": url, "model": model})
    t0 = time.time()
    evo = Evolution.start(ex, cfg, LineageStore(workdir / f"seed{seed}.sqlite"), progress=False)
    try:
        summary = evo.run()
        stop = summary.stop_reason
    except RunAborted as exc:  # fail-fast: the first children all failed the same way
        summary, stop = summarize(evo, time.time() - t0), f"aborted: {exc}"
    finally:
        evo.close()
    rows = dict(summary.model_rows)
    return {"seed": seed, "seed_score": summary.seed_score, "best_score": summary.best_score,
            "improved": bool(summary.best_score is not None and summary.seed_score is not None
                             and summary.best_score > summary.seed_score),
            "by_status": summary.by_status, "parse_rate": rows.get("parse rate"), "tokens_s": rows.get("tokens/s"),
            "stop_reason": stop, "wall_s": round(time.time() - t0, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--iterations", type=int, default=64)
    args = ap.parse_args()
    meta = run_info("python benchmarks/bench_small_model.py " + " ".join(sys.argv[1:]))
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            runs.append(one_run(args.url, args.model, seed, args.iterations, Path(tmp)))
            print(json.dumps(runs[-1]), flush=True)
    meta["load_end"] = [round(x, 2) for x in __import__("os").getloadavg()]
    out = ROOT / "benchmarks" / "results"
    (out / "small_model.json").write_text(json.dumps({"meta": meta, "runs": runs}, indent=1))
    improved = sum(r["improved"] for r in runs)
    lines = ["# examples/small_model_knapsack with SmolLM2-135M-Instruct (llama.cpp server)", "",
             f"- {meta['date']}, commit {meta['commit']}{' (dirty)' if meta['dirty'] else ''}, load {meta['load']} "
             f"-> {meta['load_end']}, {meta['machine']}", f"- command: `{meta['command']}`",
             f"- **improved its seed on {improved} of {len(runs)} run seeds** ({args.iterations} children each)", "",
             "| run seed | seed score | best score | parse rate | tokens/s | by status | wall |", "|---|---|---|---|---|---|---|"]
    for r in runs:
        lines.append(f"| {r['seed']} | {r['seed_score']:.4f} | {r['best_score']:.4f} | {r['parse_rate']} | "
                     f"{r['tokens_s']} | {' '.join(f'{k}:{v}' for k, v in sorted(r['by_status'].items()))} | "
                     f"{r['wall_s']:.0f} s |")
    (out / "small_model.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
