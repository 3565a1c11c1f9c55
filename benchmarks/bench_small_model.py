"""Does a 135M model improve its seed? ``examples/small_model_knapsack`` on five run seeds.

Runs the example with its own config (the ``block`` operator, SmolLM2-135M-Instruct sampled
in-process by the ``transformers`` backend) for ``--iterations`` children on each run seed,
and records per seed the seed program's score, the best score, whether it improved, the
replies that parsed into a child and that evaluated ok (per operator), completion tokens,
the requests' own time and the wall time. ``--url`` drives the same run through an
OpenAI-compatible server instead (llama.cpp's on the same GGUF).

Raw file: ``benchmarks/results/small_model.json`` (``--raw NAME`` for another), written after
every run seed; its tables are rendered by ``benchmarks/reports/small_model.py``.

    python benchmarks/bench_small_model.py [--seeds 0 1 2 3 4] [--iterations 64]
    python benchmarks/bench_small_model.py --url http://127.0.0.1:8791/v1 --raw small_model_llamacpp
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _raw import start_meta, write_raw  # noqa: E402

from qdevolve.db import LineageStore  # noqa: E402
from qdevolve.errors import RunAborted  # noqa: E402
from qdevolve.evolve.core.engine import Evolution  # noqa: E402
from qdevolve.evolve.report import summarize  # noqa: E402
from qdevolve.evolve.setup.example import load_example  # noqa: E402

EXAMPLE = ROOT / "examples" / "small_model_knapsack"


def reply_counts(store: LineageStore, run_id: str) -> dict[str, dict[str, Any]]:
    """Per operator: replies (children with a completion's usage), parsed into a child, evaluated ok,
    completion tokens and the requests' own seconds."""
    out: dict[str, Counter] = {}
    for _, program, result in store.iter_programs(run_id):
        usage = program.metadata.get("usage") if isinstance(program.metadata, dict) else None
        if not isinstance(usage, dict):
            continue
        c = out.setdefault(program.operator, Counter())
        c["replies"] += 1
        c["parsed"] += not program.metadata.get("failed_mutation")
        c["ok"] += bool(result is not None and result.ok)
        c["tokens"] += int(usage.get("completion_tokens") or 0)
        c["request_s"] += float(usage.get("latency_s") or 0.0)
    return {op: {k: (round(v, 3) if isinstance(v, float) else v) for k, v in c.items()} for op, c in out.items()}


def one_run(seed: int, iterations: int, workdir: Path, url: str | None, model: str) -> dict[str, Any]:
    ex = load_example(EXAMPLE)
    over: dict[str, Any] = {"iterations": iterations, "seed": seed}
    if url:
        over["backend"] = {"type": "openai", "api_base": url, "model": model}
    cfg = ex.config.with_overrides(**over)
    store = LineageStore(workdir / f"seed{seed}.sqlite")
    t0 = time.time()
    evo = Evolution.start(ex, cfg, store, progress=False)
    try:
        summary = evo.run()
        stop = summary.stop_reason
    except RunAborted as exc:  # fail-fast: the first children all failed the same way
        summary, stop = summarize(evo, time.time() - t0), f"aborted: {exc}"
    finally:
        evo.close()
    wall = round(time.time() - t0, 1)
    return {"seed": seed, "seed_score": summary.seed_score, "best_score": summary.best_score,
            "improved": bool(summary.best_score is not None and summary.seed_score is not None
                             and summary.best_score > summary.seed_score),
            "by_status": dict(summary.by_status), "replies": reply_counts(store, evo.run_id),
            "stop_reason": stop, "wall_s": wall}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--iterations", type=int, default=64)
    ap.add_argument("--url", default=None, help="Use an OpenAI-compatible server instead of the example's backend.")
    ap.add_argument("--model", default="smollm2", help="The server's model name (with --url).")
    ap.add_argument("--raw", default="small_model", help="Raw file name under benchmarks/results/.")
    args = ap.parse_args()
    meta = start_meta()
    ex = load_example(EXAMPLE)
    backend = ({"type": "openai", "api_base": args.url, "model": args.model} if args.url else ex.config.backend)
    settings = {"example": "examples/small_model_knapsack", "iterations": args.iterations, "backend": backend,
                "mutation": ex.config.mutation, "max_pending": ex.config.max_pending, "workers": ex.config.workers}
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            runs.append(one_run(seed, args.iterations, Path(tmp), args.url, args.model))
            print(json.dumps(runs[-1]), flush=True)
            write_raw(args.raw, {"settings": settings, "runs": runs}, seeds=[r["seed"] for r in runs], meta=meta)
    sys.path.insert(0, str(ROOT / "benchmarks" / "reports"))
    from small_model import render  # the tables BENCHMARKS.md shows

    print(render(json.loads((ROOT / "benchmarks" / "results" / f"{args.raw}.json").read_text()))["table"])


if __name__ == "__main__":
    main()
