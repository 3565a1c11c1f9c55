"""The fast check of the problem suite (``bench_suite.py --fast``): the bespoke loop, one policy trained inside the loop across all
training targets, against the frozen base (successor of ``bench_joined.py``).

Every arm draws the same number of samples (``--samples``, spread evenly over the training
targets by :class:`~qdevolve.rl.tasks.suite_loop.SuiteLoop`), 5 seeds, one pre-trained base
per seed (cached under ``.cache/suite_bases``). Arms: the frozen base, ``grpo``, ``ips``,
``rare``, ``vpo`` (vector reward = the per-example pass bits), ``passk``, ``es``, ``entropic``.
Measured against samples: targets solved, the top-50 mean per target, distinct semantic
classes of correct programs per solved target; after training, on the held-out targets
(read only here, after the run): pass@1 and pass@8 from the seed parent, and targets solved
by a short evolution with the trained (then frozen) policy, against the frozen base.

    nice -n 19 python benchmarks/bench_suite.py --fast                 # the default budget
    nice -n 19 python benchmarks/bench_suite.py --fast --seeds 0 --arms grpo,vpo --samples 1024
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from suite_report import render  # noqa: E402
from worker_pool import run_in_workers  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
CACHE = ROOT / ".cache" / "suite_bases"
# arm -> (objective or None for the frozen base, reward)
ARMS: dict[str, tuple[dict[str, Any] | None, str]] = {
    "frozen base": (None, "score"),
    "grpo": ({"type": "grpo"}, "score"),
    "ips": ({"type": "ips", "reward": "raw"}, "score"),  # IPS on the score (partial credit), not thresholded
    "rare": ({"type": "rare", "alpha": 1.0}, "score"),
    "vpo": ({"type": "vpo", "m": 1}, "score"),
    "passk": ({"type": "passk", "k": 4}, "binary"),
    "es": ({"type": "es", "population": 8, "sigma": 0.01, "alpha": 0.003}, "score"),
    "entropic": ({"type": "entropic"}, "score"),
}


def run_one(plan: dict[str, Any]) -> dict[str, Any]:
    """Train one arm on the training targets; then the held-out measurements."""
    import torch

    from qdevolve.rl.tasks.suite import load_targets
    from qdevolve.rl.tasks.suite_loop import (
        LoopConfig,
        SuiteLoop,
        load_policy,
        policy_pass_at,
        suite_base_dir,
    )

    torch.manual_seed(plan["seed"])
    objective, reward = ARMS[plan["arm"]]
    model, tok = load_policy(suite_base_dir(plan["seed"], CACHE))
    cfg = LoopConfig(objective=objective, reward=reward, samples=plan["samples"], lr=plan["lr"],
                     group=plan["group"], groups_per_step=plan["groups_per_step"], checkpoints=plan["checkpoints"],
                     seed=plan["seed"], trainer={"beta": plan["beta"]} if plan["beta"] else {})
    result = SuiteLoop(load_targets(), model, tok, cfg).run()
    # evaluation only, after training: the held-out targets
    from qdevolve.rl.tasks.suite_heldout import load_heldout

    held = load_heldout()
    t0 = time.perf_counter()
    result["heldout_pass"] = policy_pass_at(model, tok, held, n=plan["heldout_n"], ks=(1, 8), seed=plan["seed"] + 100)
    frozen = LoopConfig(objective=None, samples=plan["heldout_samples"] * len(held), seed=plan["seed"] + 200,
                        group=plan["group"], groups_per_step=min(plan["groups_per_step"], len(held)))
    result["heldout_solved"] = SuiteLoop(held, model, tok, frozen).run()["curves"]["solved"][-1]
    result["heldout_s"] = time.perf_counter() - t0
    return result


def worker(plans: list[dict[str, Any]]) -> None:
    import torch

    torch.set_num_threads(1)
    for plan in plans:
        t0 = time.time()
        try:
            out = {**run_one(plan), "error": None}
        except Exception as exc:  # noqa: BLE001 - reported per run, the other runs go on
            out = {"error": f"{type(exc).__name__}: {exc}"}
        out.update(arm=plan["arm"], seed=plan["seed"], run_wall_s=time.time() - t0)
        print(json.dumps(out), flush=True)


def run_all(plans: list[dict[str, Any]], jobs: int) -> list[dict[str, Any]]:
    """Spread the plans over ``jobs`` worker processes (``worker_pool``); the runs in plan order."""
    runs: list[dict[str, Any]] = []

    def on_result(r: dict[str, Any]) -> None:
        runs.append(r)
        if r["error"]:
            print(f"{r['arm']:12s} seed {r['seed']}: FAILED {r['error']}", flush=True)
            return
        c = r["curves"]
        print(f"{r['arm']:12s} seed {r['seed']}: solved {c['solved'][-1]:.0f} top50 {c['top50'][-1]:.3f} "
              f"classes/solved {c['classes_per_solved'][-1]:.2f} held-out solved {r['heldout_solved']:.0f} "
              f"({r['run_wall_s']:.0f} s)", flush=True)

    run_in_workers(Path(__file__).resolve(), plans, jobs, on_result)
    order = {(p["arm"], p["seed"]): i for i, p in enumerate(plans)}
    return sorted(runs, key=lambda r: order[(r["arm"], r["seed"])])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=2048, help="policy samples per run (every arm the same)")
    ap.add_argument("--points", type=int, default=8, help="curve checkpoints (evenly spaced)")
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--beta", type=float, default=0.0, help="KL coefficient to the base policy (k3 per token)")
    ap.add_argument("--group", type=int, default=8, help="children per parent (the RL group)")
    ap.add_argument("--groups-per-step", type=int, default=8, help="groups per trainer step")
    ap.add_argument("--heldout-n", type=int, default=64, help="samples per held-out target for pass@k")
    ap.add_argument("--heldout-samples", type=int, default=64,
                    help="samples per held-out target of the short evolution with the final policy")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default=str(RESULTS / "suite_fast.md"),
                    help="report path (default suite_fast.md: the earlier suite.md holds the 2026-12-03 runs)")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--merge", default=None, help="one report from these JSON reports (a,b,...)")
    args = ap.parse_args()
    if args.worker is not None:
        worker(json.loads(args.worker))
        return
    if args.merge:
        reports = [json.loads(Path(p).read_text()) for p in args.merge.split(",")]
        report = dict(reports[0])
        report["runs"] = [r for rep in reports for r in rep["runs"]]
        report["seeds"] = list(dict.fromkeys(s for rep in reports for s in rep["seeds"]))
        report["wall_s"] = sum(rep["wall_s"] for rep in reports)
        report["base_build_s"] = sum(rep.get("base_build_s", 0.0) for rep in reports)
        report["load_end"] = reports[-1].get("load_end", [])
        report["command"] = " + ".join(rep.get("command", "") for rep in reports)
        report["date"] = f"{reports[0]['date']} to {reports[-1]['date']}"
        write(report, Path(args.out))
        return
    seeds = [int(s) for s in args.seeds.split(",")]
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = sorted(set(arms) - set(ARMS))
    if unknown:
        raise SystemExit(f"--arms: unknown arm(s) {', '.join(unknown)}; known: {', '.join(ARMS)}")
    import torch

    from qdevolve.rl.tasks.suite_loop import suite_base_dir

    torch.set_num_threads(1)
    t_build = time.time()
    for s in seeds:
        suite_base_dir(s, CACHE)
    build_s = time.time() - t_build
    step = max(1, args.samples // args.points)
    checkpoints = [step * (i + 1) for i in range(args.points)]
    plans = [{"arm": a, "seed": s, "samples": args.samples, "lr": args.lr, "beta": args.beta, "group": args.group,
              "groups_per_step": args.groups_per_step, "checkpoints": checkpoints, "heldout_n": args.heldout_n,
              "heldout_samples": args.heldout_samples} for s in seeds for a in arms]
    t0, load0 = time.time(), os.getloadavg()
    runs = run_all(plans, max(1, args.jobs))
    recorded = {k: v for k, v in vars(args).items() if k not in ("worker", "merge")}
    recorded["out"] = os.path.relpath(Path(args.out).resolve(), ROOT)  # no path of this machine in the report
    report = {"args": recorded, "seeds": seeds,
              "arms": arms, "runs": runs, "checkpoints": checkpoints, "wall_s": time.time() - t0,
              "base_build_s": build_s, "load_start": list(load0), "load_end": list(os.getloadavg()),
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "command": "python benchmarks/bench_suite.py " + " ".join(sys.argv[1:])}
    write(report, Path(args.out))


def write(report: dict[str, Any], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(report, indent=1))
    text = render(report, png=out.with_suffix(".png"))
    out.write_text(text)
    print(text)
    print(f"wrote {out}, {out.with_suffix('.json')} and {out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
