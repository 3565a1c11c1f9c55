"""Does training the model in the loop pay with a pretrained model? SmolLM2-135M on one problem.

The single-problem, test-time setting where the literature reports wins for training in the
loop (EvoTune, ThetaEvolve): ``examples/small_model_knapsack`` run as a joined run, the
``block`` operator sampling SmolLM2-135M-Instruct in process, every model call a rollout.
Four arms at equal model calls, on the same run seeds:

* ``frozen``: the same joined run with training off (``train.enabled: false``), the base only;
* ``grpo``: GRPO on LoRA adapters (rank 4), KL anchor to the base (beta), reward the child's
  score (``--reward score``, the default: 0 for a reply that gives no valid program, so the
  group contrasts valid and failed children; ``improvement_clipped``: the clipped improvement
  over the parent, which pays about 1 child in 30 on this problem), a copy of the parent or of
  a stored program -0.3 (``shaping``);
* ``ips``: IPS (inverse-probability scaling by the child's strategy cluster, ``ast_shape``)
  on the same LoRA adapters, reward and anchor;
* ``es``: evolution strategies on all weights, forward passes only: one group per population
  member, an update per population.

Per run the raw file keeps every child in sampling order (score, status, improvement over its
parent, cluster key, group, policy version) and each trainer step's metrics; the tables and
the calls-vs-quality plot are rendered by ``benchmarks/reports/real_join.py``.

    python benchmarks/bench_real_join.py                       # 3 run seeds x 4 arms x 32 calls, 2 at a time
    python benchmarks/bench_real_join.py --jobs 1              # one run after another
    python benchmarks/bench_real_join.py --seeds 0 --arms frozen grpo --calls 16
    python benchmarks/bench_real_join.py --merge real_join_b      # add seeds run by a second process
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _raw import load_raw, raw_path, start_meta, write_raw  # noqa: E402
from worker_pool import run_in_workers  # noqa: E402

from qdevolve.db import LineageStore  # noqa: E402
from qdevolve.errors import RunAborted  # noqa: E402
from qdevolve.evolve.core.engine import Evolution  # noqa: E402
from qdevolve.evolve.report import summarize  # noqa: E402
from qdevolve.evolve.setup.example import load_example  # noqa: E402
from qdevolve.evolve.training import apply_policy_options  # noqa: E402

EXAMPLE = ROOT / "examples" / "small_model_knapsack"
ARMS = ("frozen", "grpo", "ips", "es")
MAX_TOKENS = 128  # a priority() body fits; 200-token replies were mostly rambling past the block


def train_section(arm: str, *, group: int, lr: float, beta: float, every: int, reward: str) -> dict[str, Any]:
    """The ``train`` section of one arm (module docstring)."""
    trainer = {"use_lora": True, "learning_rate": lr, "beta": beta, "max_completion_length": MAX_TOKENS,
               # one RL group per micro-batch (2 for a step of `every` children): its completions share
               # the prompt's pass, and a micro-batch holds one prompt's activations, not G of them
               "gradient_accumulation_steps": max(1, every // group),
               "temperature": 0.6}  # the block operator samples at 0.6: log-probs must match
    objective: dict[str, Any] = {"type": "grpo"}
    if arm == "ips":
        objective = {"type": "ips", "key": "cluster", "reward": "raw"}  # graded: knapsack scores never reach 1
    elif arm == "es":  # every weight, forward passes only; a population is `group`-children groups
        objective = {"type": "es", "population": 2 * every // group, "sigma": 1e-3, "alpha": 5e-4}
        trainer = {"use_lora": False, "temperature": 0.6, "max_completion_length": MAX_TOKENS}
    return {"policy": "smollm2-135m-instruct", "objective": objective, "every": every,
            "reward": reward, "shaping": {"lazy": -0.3, "duplicate": -0.3},
            "cluster": {"type": "ast_shape"}, "trainer": trainer,
            "backend": {"batch_size": 16}, "enabled": arm != "frozen", "group_size": group}


def children(store: LineageStore, run_id: str) -> list[dict[str, Any]]:
    """Every model-made child in sampling order (rollout seq): what the report needs of it."""
    out = []
    for _seq, ro in store.rollouts(run_id):
        prog = store.get_program(ro.program_id) if ro.program_id else None
        res = store.get_evaluation(ro.program_id) if ro.program_id else None
        parent = store.get_evaluation(prog.parent_ids[0]) if prog and prog.parent_ids else None
        ok = bool(res is not None and res.ok and res.score is not None)
        meta = ro.metadata or {}
        out.append({"score": round(res.score, 6) if ok else None, "ok": ok,
                    "parsed": bool(prog is not None and not prog.metadata.get("failed_mutation")),
                    "copy": "duplicate_of" in meta,
                    "parent_score": None if parent is None or parent.score is None else round(parent.score, 6),
                    "reward": ro.reward, "cluster": ro.cluster_key, "group": ro.group_id,
                    "version": ro.policy_version, "tokens": ro.completion_tokens})
    return out


def one_run(arm: str, seed: int, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    ex = load_example(EXAMPLE)
    mutation = [{**m, "max_tokens": MAX_TOKENS} for m in ex.config.mutation]
    cfg = ex.config.with_overrides(iterations=args.calls, seed=seed, children_per_parent=args.group,
                                   mutation=mutation,
                                   train=train_section(arm, group=args.group, lr=args.lr, beta=args.beta,
                                                       every=args.every, reward=args.reward))
    cfg = apply_policy_options(cfg, policy=None, objective=None, every=None)
    # The example keeps 16 plans in flight for batching; a trained run keeps the listener's few
    # (the run's workers / group + 1), so trainer steps land between generations: with 16 every
    # generation of a 32-call run was queued before the first step (it trained on 28 completions).
    cfg = dataclasses.replace(cfg, max_pending=None)
    store = LineageStore(workdir / f"{arm}-{seed}.sqlite", create=True)
    t0 = time.time()
    evo = Evolution.start(ex, cfg, store, progress=False)
    try:
        summary = evo.run()
        stop = summary.stop_reason
    except RunAborted as exc:
        summary, stop = summarize(evo, time.time() - t0), f"aborted: {exc}"
    finally:
        evo.close()
    wall = round(time.time() - t0, 1)
    steps = [{"version": r["version"], **{k: v for k, v in (r.get("metrics") or {}).items()
                                          if isinstance(v, (int, float)) and not isinstance(v, bool)}}
             for r in store.policy_versions(evo.run_id) if r["version"] > 0]
    return {"arm": arm, "seed": seed, "seed_score": summary.seed_score, "best_score": summary.best_score,
            "children": children(store, evo.run_id), "steps": steps, "stop_reason": stop, "wall_s": wall}


def worker(plans: list[dict[str, Any]]) -> None:
    """``--worker``: run each plan (arm, seed, settings) in this process; one JSON line per run."""
    with tempfile.TemporaryDirectory() as tmp:
        for plan in plans:
            args = argparse.Namespace(**plan["settings"])
            print(json.dumps(one_run(plan["arm"], plan["seed"], args, Path(tmp))), flush=True)


def merge(name: str, parts: list[str]) -> None:
    """Add the runs of the raw files ``parts`` to raw file ``name`` (same settings required)."""
    base = load_raw(name)
    meta = dict(base["meta"])
    kept = {(r["arm"], r["seed"]) for r in base["runs"]}
    meta_parts = list(meta.get("parts") or [{k: v for k, v in base["meta"].items() if k != "parts"}])
    runs = list(base["runs"])
    for part in parts:
        other = load_raw(part)
        if other["settings"] != base["settings"]:
            raise SystemExit(f"--merge {part}: its settings differ from {name}'s; only equal settings merge")
        runs += [r for r in other["runs"] if (r["arm"], r["seed"]) not in kept]
        meta_parts.append(other["meta"])
    seeds = sorted({r["seed"] for r in runs})
    commands = " + ".join(str(p.get("command", "?")) for p in meta_parts)
    started = min(str(p.get("started") or p.get("date")) for p in meta_parts)
    dirty = any(bool(p.get("dirty")) for p in meta_parts)
    write_raw(name, {"settings": base["settings"], "runs": runs}, seeds=seeds, command=commands,
              meta={"commit": meta.get("commit"), "dirty": dirty, "started": started,
                    "loadavg_start": meta.get("loadavg_start"), "parts": meta_parts})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    ap.add_argument("--calls", type=int, default=32, help="Model calls (children) per run, equal for every arm.")
    ap.add_argument("--group", type=int, default=4, help="Children per parent prompt: one RL group.")
    ap.add_argument("--every", type=int, default=8, help="A trainer step every N evaluated children.")
    ap.add_argument("--lr", type=float, default=2e-4, help="LoRA learning rate (grpo, ips).")
    ap.add_argument("--beta", type=float, default=0.1, help="KL anchor to the base (grpo, ips).")
    ap.add_argument("--reward", default="score", choices=("score", "improvement_clipped"),
                    help="The rollout reward: the child's score (0 for a reply that gives no valid program), "
                         "or its clipped improvement over the parent.")
    ap.add_argument("--jobs", type=int, default=2,
                    help="Runs at once, each in a worker process with one BLAS thread (default 2: one per core "
                         "of the 2-core machine the figures were measured on; a run alone does not keep both busy).")
    ap.add_argument("--raw", default="real_join", help="Raw file name under benchmarks/results/.")
    ap.add_argument("--append", action="store_true", help="Keep the raw file's runs and add these.")
    ap.add_argument("--merge", nargs="+", metavar="NAME", default=None,
                    help="Run nothing: add the runs of these raw files (e.g. seeds run in a second process) "
                         "to --raw; their own meta is kept under meta.parts.")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker is not None:
        worker(json.loads(args.worker))
        return
    if args.merge:
        merge(args.raw, args.merge)
        return
    meta = start_meta()
    settings = {"example": "examples/small_model_knapsack", "calls": args.calls, "group": args.group,
                "every": args.every, "lr": args.lr, "beta": args.beta, "max_tokens": MAX_TOKENS,
                "reward": args.reward, "max_pending": "the joined listener's (workers / group + 1)",
                "arms": {a: train_section(a, group=args.group, lr=args.lr, beta=args.beta, every=args.every,
                                          reward=args.reward) for a in ARMS}}
    runs: list[dict[str, Any]] = []
    if args.append and raw_path(args.raw).exists():
        runs = [r for r in load_raw(args.raw)["runs"] if (r["arm"], r["seed"]) not in
                {(a, s) for a in args.arms for s in args.seeds}]
    run_settings = {k: getattr(args, k) for k in ("calls", "group", "every", "lr", "beta", "reward")}
    # seed-major: an interrupted run still leaves paired arms
    plans = [{"arm": arm, "seed": seed, "settings": run_settings} for seed in args.seeds for arm in args.arms]
    order = {(p["arm"], p["seed"]): i for i, p in enumerate(plans)}
    lock = threading.Lock()

    def keep(r: dict[str, Any]) -> None:  # from a reader thread, as each run ends
        with lock:
            runs.append(r)
            runs.sort(key=lambda x: order.get((x["arm"], x["seed"]), -1))
            print(json.dumps({k: v for k, v in r.items() if k not in ("children",)}), flush=True)
            write_raw(args.raw, {"settings": settings, "runs": runs}, seeds=sorted({x["seed"] for x in runs}),
                      meta={**meta, "jobs": args.jobs})

    run_in_workers(Path(__file__), plans, max(1, args.jobs), keep)
    sys.path.insert(0, str(ROOT / "benchmarks" / "reports"))
    from real_join import render  # the tables BENCHMARKS.md shows

    for name, text in render(load_raw(args.raw)).items():
        print(f"\n{name}:\n{text}")


if __name__ == "__main__":
    main()
