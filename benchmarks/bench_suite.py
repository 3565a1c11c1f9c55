"""The problem suite through qdevolve's own joined run: one policy shared by every target's
evolution, trained inside the loop, every arm at equal samples (issue 33, items 1-3).

Each run is ``qdevolve run`` on ``examples/suite`` (or ``--targets N`` of its targets spread
over difficulty, in a temporary copy of the example): the map-elites archive, the local
sandbox running the example's evaluator, the training listener and the lineage database.
Every arm draws the same number of policy samples (``--samples-per-target`` x targets,
enforced by ``train.max_samples``; copies of stored programs count), one pre-trained base per
seed (cached under ``.cache/suite_bases``, the same bases as the fast check). Arms are
``frozen`` or ``OBJECTIVE[+CHANGE...]`` (``benchmarks/suite_engine.py``: ``kl_lr``,
``improve``, ``anycopy``, ``fail``: failures priced without the same-class penalty, ``all``: the first three). Measured from each run's database: targets solved against
samples, semantic classes per solved target; after the run, held-out targets from the final
policy. The raw file (``benchmarks/results/suite_engine.json``) is rewritten after every
finished run; ``--resume`` keeps the runs it holds and runs only the missing ones; the tables
and the claims are ``benchmarks/reports/suite_engine.py``.

``--fast`` runs the bespoke loop instead (``benchmarks/suite_fast.py``: no archive, sandbox
or engine; a quick check, not a verdict on the product).

    nice -n 10 python benchmarks/bench_suite.py                    # 32 targets x 200 samples, 5 seeds
    nice -n 10 python benchmarks/bench_suite.py --targets 6 --seeds 5,6,7,8,9 --arms frozen,grpo,ips+all
    python benchmarks/bench_suite.py --fast --seeds 0 --arms grpo  # the bespoke loop
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
CACHE = ROOT / ".cache" / "suite_bases"
DEFAULT_ARMS = "frozen,grpo,grpo+all,ips+all,vpo+all"


def worker(plans: list[dict[str, Any]]) -> None:
    """Run and measure each plan in this process (torch imported once)."""
    import torch
    from suite_engine import run_plan

    torch.set_num_threads(1)
    for plan in plans:
        t0 = time.time()
        try:
            out = {**run_plan(plan, plan["checkpoints"], plan["heldout_n"]), "error": None}
        except Exception as exc:  # noqa: BLE001 - reported per run, the other runs go on
            out = {"error": f"{type(exc).__name__}: {exc}"}
        out.update(arm=plan["arm"], seed=plan["seed"], wall_s=time.time() - t0)
        print(json.dumps(out), flush=True)


def git_facts() -> tuple[str, bool]:
    def git(*a: str) -> str:
        return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True, check=False).stdout.strip()

    # the raw files the run writes (benchmarks/results/) are outputs, not the code measured
    return git("rev-parse", "HEAD"), bool(git("status", "--porcelain", "--untracked-files=no", "--", ".",
                                              ":(exclude)benchmarks/results"))


def meta(command: str, seeds: list[int], load0: tuple[float, ...]) -> dict[str, Any]:
    import torch

    commit, dirty = git_facts()
    return {"commit": commit, "dirty": dirty, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "command": command, "loadavg": list(os.getloadavg()), "loadavg_start": list(load0),
            "machine": {"cpu_count": os.cpu_count(), "torch": torch.__version__, "python": platform.python_version()},
            "seeds": seeds}


def write_raw(path: Path, raw: dict[str, Any]) -> None:
    """Write the raw file atomically (a kill never leaves half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(raw, indent=1))
    tmp.replace(path)


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--fast" in argv:
        argv.remove("--fast")
        import suite_fast

        sys.argv = [str(Path(suite_fast.__file__)), *argv]
        suite_fast.main()
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arms", default=DEFAULT_ARMS, help="comma-separated arms (frozen, OBJECTIVE[+CHANGE...])")
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--targets", type=int, default=None, help="use N targets spread over difficulty (default all 32)")
    ap.add_argument("--samples-per-target", type=int, default=200, help="policy samples per target (every arm)")
    ap.add_argument("--examples", type=int, default=2, choices=(2, 3), help="examples shown per target")
    ap.add_argument("--every", type=int, default=64, help="evaluations per trainer step")
    ap.add_argument("--group", type=int, default=8, help="children per parent prompt (the RL group)")
    ap.add_argument("--points", type=int, default=8, help="curve points (evenly spaced in samples)")
    ap.add_argument("--heldout-n", type=int, default=64, help="samples per held-out target after the run")
    ap.add_argument("--jobs", type=int, default=2, help="runs in parallel (worker processes)")
    ap.add_argument("--out", default=str(RESULTS / "suite_engine.json"))
    ap.add_argument("--resume", action="store_true", help="keep the runs of --out with these settings; run the rest")
    ap.add_argument("--work", default=None, help="directory for the runs' databases (default: a new temporary one)")
    ap.add_argument("--remeasure-groups", default=None, metavar="WORK",
                    help="run nothing: add each run's group statistics to --out from its database kept under WORK")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker is not None:
        worker(json.loads(args.worker))
        return
    from suite_engine import parse_arm, plan_run, remeasure_groups, suite_targets, write_example

    if args.remeasure_groups:
        out = Path(args.out)
        raw = json.loads(out.read_text())
        n = remeasure_groups(raw, Path(args.remeasure_groups))
        raw["meta"]["groups_remeasured"] = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "runs": n,
                                            "command": "python benchmarks/bench_suite.py --out "
                                                       f"{out.relative_to(ROOT) if out.is_relative_to(ROOT) else out} "
                                                       "--remeasure-groups WORK"}
        write_raw(out, raw)
        print(f"group statistics of {n} runs added to {out}")
        return

    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    try:
        for a in arms:
            parse_arm(a)
    except ValueError as exc:
        raise SystemExit(f"--arms: {exc}") from None
    seeds = [int(s) for s in args.seeds.split(",")]
    targets = suite_targets(args.targets)
    samples = args.samples_per_target * len(targets)
    step = max(1, samples // args.points)
    checkpoints = [step * (i + 1) for i in range(args.points - 1)] + [samples]
    settings = {"targets": [t["name"] for t in targets], "samples_per_target": args.samples_per_target,
                "samples": samples, "examples": args.examples, "every": args.every, "group": args.group,
                "heldout_n": args.heldout_n, "checkpoints": checkpoints}
    out = Path(args.out)
    runs: list[dict[str, Any]] = []
    if args.resume and out.exists():
        old = json.loads(out.read_text())
        if old.get("settings") != settings:
            raise SystemExit(f"--resume: {out} was measured with other settings ({old.get('settings')}); "
                             "pass another --out or the same settings")
        runs = [r for r in old["runs"] if not r.get("error")]
        for r in runs:  # a resumed file says which commit measured each of its runs
            r.setdefault("commit", old["meta"].get("commit"))
    done = {(r["arm"], r["seed"]) for r in runs}
    import torch

    from qdevolve.rl.tasks.suite_loop import suite_base_dir

    torch.set_num_threads(1)
    t_build = time.time()
    bases = {s: str(suite_base_dir(s, CACHE)) for s in seeds}
    build_s = time.time() - t_build
    shown = [a for i, a in enumerate(argv) if a != "--work" and (i == 0 or argv[i - 1] != "--work")]
    command = "python benchmarks/bench_suite.py " + " ".join(shown)  # no path of this machine
    load0 = os.getloadavg()
    tmp = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="suite-engine-"))
    tmp.mkdir(parents=True, exist_ok=True)
    example = write_example(tmp / "example", targets, args.examples)
    plans = []
    for s in seeds:
        for a in arms:
            if (a, s) in done:
                continue
            plan = plan_run(a, s, tmp=tmp, example=example, policy=bases[s], samples=samples, every=args.every,
                            group=args.group, examples=args.examples)
            plans.append({**plan, "checkpoints": checkpoints, "heldout_n": args.heldout_n})
    raw: dict[str, Any] = {"meta": meta(command, seeds, load0), "settings": settings, "arms": arms,
                           "base_build_s": build_s, "runs": runs}
    write_raw(out, raw)
    t0 = time.time()

    commit_now = git_facts()[0]

    def on_result(r: dict[str, Any]) -> None:
        r.setdefault("commit", commit_now)
        runs.append(r)
        raw["meta"] = meta(command, seeds, load0)
        raw["meta"]["wall_s"] = time.time() - t0
        write_raw(out, raw)
        if r["error"]:
            print(f"{r['arm']:14s} seed {r['seed']}: FAILED {r['error']}", flush=True)
            return
        c = r["curves"]
        print(f"{r['arm']:14s} seed {r['seed']}: solved {c['solved'][-1]:.0f}/{len(targets)} classes/solved "
              f"{c['classes_per_solved'][-1]:.2f} held-out solved {r['heldout']['solved']:.0f} "
              f"samples {r['samples']} evals {r['evaluations']} ({r['wall_s']:.0f} s)", flush=True)

    from worker_pool import run_in_workers

    if plans:
        run_in_workers(Path(__file__).resolve(), plans, max(1, min(args.jobs, len(plans))), on_result)
    order = {(a, s): i for i, (s, a) in enumerate((s, a) for s in seeds for a in arms)}
    runs.sort(key=lambda r: order.get((r["arm"], r["seed"]), 10**9))
    write_raw(out, raw)
    from reports.suite_engine import render

    for key, text in render(raw).items():
        print(f"\n## {key}\n\n{text}")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
