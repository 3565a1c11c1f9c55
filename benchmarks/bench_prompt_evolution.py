"""Does evolving prompts help at equal model calls? A real model behind an OpenAI-compatible
server (e.g. SmolLM2-135M-Instruct via ``python -m llama_cpp.server``), two arms per seed:

* ``fixed``: ``prompt.evolve`` off, ``calls`` children (one model call each);
* ``evolve``: ``prompt: {evolve: true, every: K}`` with the ``model`` template mutator; its
  meta-prompts are model calls too, so it gets ``calls - floor(children / K)`` children and
  both arms spend the same number of model calls.

Reported per arm and seed: children, model calls (children + meta-prompts), children ``ok``,
best score, mean ``ok`` child score, templates made / refused. The neutral scripted servers
ignore prompts, so only a real model can answer the question.

    python benchmarks/bench_prompt_evolution.py --api-base http://127.0.0.1:8093/v1 \
        [--example examples/function_minimization] [--calls 12] [--every 3] [--seeds 1 2 3]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import time
from pathlib import Path

from qdevolve.db import LineageStore
from qdevolve.evolve.core.engine import Evolution
from qdevolve.evolve.setup.example import load_example

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from _raw import start_meta, write_raw  # noqa: E402


def children_for(calls: int, every: int) -> int:
    """The most children ``n`` with ``n + n // every <= calls`` (meta-prompts included)."""
    n = calls
    while n + n // every > calls:
        n -= 1
    return n


def run_arm(example: Path, db: Path, api_base: str, model: str, seed: int, children: int,
            evolve: bool, every: int, max_tokens: int, operator: str = "block") -> dict:
    ex = load_example(example)
    prompt = {**ex.config.prompt, **({"evolve": True, "every": every, "template_mutator": {
        "type": "model", "max_tokens": max_tokens}} if evolve else {})}
    cfg = ex.config.with_overrides(iterations=children, workers=1, seed=seed, max_pending=1,
                                   backend={"type": "openai", "api_base": api_base, "model": model,
                                            "timeout_s": 900.0},
                                   mutation=[{"type": operator, "max_tokens": max_tokens}],
                                   prompt=prompt, inspirations={"n_best": 0, "n_diverse": 0})
    t0 = time.time()
    evo = Evolution.start(ex, cfg, LineageStore(db), progress=False)
    evo.run()
    evo.close()
    con = sqlite3.connect(db)
    rows = con.execute("SELECT e.status, e.score FROM programs p JOIN evaluations e ON e.program_id = p.id "
                       "WHERE p.operator != 'seed'").fetchall()
    seed_score = con.execute("SELECT e.score FROM programs p JOIN evaluations e ON e.program_id = p.id "
                             "WHERE p.operator = 'seed'").fetchone()[0]
    made = con.execute("SELECT status, COUNT(*) FROM prompt_templates WHERE origin != 'seed' GROUP BY 1").fetchall()
    ok = [s for st, s in rows if st == "ok" and s is not None]
    meta = sum(n for _st, n in made)
    return {"arm": "evolve" if evolve else "fixed", "seed": seed, "children": len(rows),
            "model_calls": len(rows) + meta, "ok": len(ok), "seed_score": seed_score,
            "best": max(ok, default=None), "mean_ok": sum(ok) / len(ok) if ok else None,
            "templates": dict(made), "wall_s": round(time.time() - t0, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--api-base", required=True)
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--example", type=Path, default=ROOT / "examples" / "small_model_knapsack")
    ap.add_argument("--operator", default="block", help="the mutation operator of both arms (a 135M model "
                    "writes no SEARCH/REPLACE blocks and drops rewrite markers; block works)")
    ap.add_argument("--raw", default=None,
                    help="also write the raw file benchmarks/results/NAME.json (every arm's row; commit, dirty "
                         "flag, command, load: benchmarks/_raw.py), e.g. --raw prompt_evolution")
    ap.add_argument("--calls", type=int, default=12)
    ap.add_argument("--every", type=int, default=3)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--out", type=Path, default=Path("archives/bench_prompt_evolution"))
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    measured = start_meta()  # the tree and load when the measurement starts
    rows: list[dict] = []
    for seed in args.seeds:
        for evolve in (False, True):
            n = children_for(args.calls, args.every) if evolve else args.calls
            db = args.out / f"{'evolve' if evolve else 'fixed'}-{seed}-{int(time.time())}.sqlite"
            row = run_arm(args.example, db, args.api_base, args.model, seed, n, evolve, args.every,
                          args.max_tokens, args.operator)
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.raw:
        write_raw(args.raw, {"rows": rows}, seeds=args.seeds, meta=measured)
    return 0


if __name__ == "__main__":
    sys.exit(main())
