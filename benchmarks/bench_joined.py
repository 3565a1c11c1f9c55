"""The joined system on ``examples/expr_evolution`` (one target; its successor on a 32-target
problem suite with one shared policy is ``benchmarks/bench_suite.py``): does the training objective of the
mutation policy change how many *differently shaped* correct programs the archive keeps?

The policy is the ``policy`` operator over the tiny ``expr_edit`` model (pre-trained on
parent -> child edit pairs, cached under ``~/.cache/qdevolve/tiny``): every prompt holds the
parent's expression and its pass bits, and 8 children of the same parent form one RL group.
Compute-matched: every arm draws the same number of policy samples (``--samples``, enforced by
``train.max_samples``; the frozen base samples as many as the trained arms), copies of stored
programs included: a copy is not evaluated again but its rollout is rewarded (the copied
program's reward, then ThetaEvolve's -0.3 for a lazy or duplicate child) and trained on.
Evaluations per arm therefore differ and are reported. A trainer step every ``--every``
evaluations at learning rate ``--lr``; ES updates once per population of 8 groups (64
samples). Rewards: binary correctness for the counting objectives (IPS, Rare, pass@k), the
score (fraction of the five tests) for the others. Rare clusters by the child's own feature
cell (a strategy key, admitted or not). Arms: the frozen base (no trainer step), ``grpo``,
``ips``, ``rare``, ``vpo``, ``passk``, ``es``, ``entropic``.

Each run goes through the ``qdevolve run`` command (called in ``--jobs`` worker processes, so
torch is imported once per worker), the real engine, store, backend and trainer. Evaluation
uses the example's own scoring functions in-process (the ``expr_inprocess`` sandbox
registered by this file): the child's ``EXPR`` string is read from its code with a regular
expression and walked by the evaluator's AST whitelist, never executed. It replaces the
subprocess sandbox only to fit the budget (``--sandbox local`` runs the example's evaluator in
the real sandbox instead, about 10x slower).

Measured per run, against evaluations (replayed from the lineage database): the mean score of
the top 50 programs (EvoTune's measure), archive cells holding a correct program, distinct
correct programs (normalised expression text) and semantic classes (outputs on x = -4..11),
best score; samples, evaluations and copies; pass@1 of each policy version (the share of its
samples, copies included, whose program is correct); trainer step seconds, evaluations per
second, CPU seconds and load. Measurements: ``benchmarks/joined_measure.py``; tables:
``benchmarks/joined_report.py``.

    python benchmarks/bench_joined.py                                   # default: 2,400 samples, 5 seeds, a base per seed
    python benchmarks/bench_joined.py --samples 3200 --checkpoints 500,1000,1500,2000   # the BENCHMARKS.md table
    python benchmarks/bench_joined.py --seeds 0 --out s0.md             # one seed; then --merge s0.json,s1.json,...
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

from qdevolve import registry
from qdevolve.types import EvalResult, Program

sys.path.insert(0, str(Path(__file__).resolve().parent))
from joined_measure import EXAMPLE, example_evaluator, expr_of, measure, operator_check, outputs  # noqa: E402
from joined_report import render  # noqa: E402  (the tables, benchmarks/joined_report.py)
from joined_report import uptime as _uptime  # noqa: E402
from worker_pool import run_in_workers  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
# arm -> (objective or None for the frozen base, train.reward, cluster). Counting objectives
# (IPS, Rare, pass@k) get binary correctness; the others the score (fraction of tests passed).
ARMS: dict[str, tuple[dict[str, Any] | None, str, dict[str, Any] | None]] = {
    "frozen base": (None, "score", None),
    "grpo": ({"type": "grpo"}, "score", None),
    "ips": ({"type": "ips"}, "binary", None),
    "rare": ({"type": "rare", "alpha": 1.0}, "binary", {"type": "feature_cell"}),
    "vpo": ({"type": "vpo", "m": 1}, "score", None),
    "passk": ({"type": "passk", "k": 4}, "binary", None),
    "es": ({"type": "es", "population": 8, "sigma": 0.01, "alpha": 0.003}, "score", None),
    "entropic": ({"type": "entropic"}, "score", None),
}
# ThetaEvolve's graded rewards: a lazy child -0.3 (here for copies of any stored program too),
# a validation failure (text that is not a DSL expression) -0.1, no program at all -0.4. Without
# the 'invalid' penalty a policy pushed off copies drifts to unique garbage (score 0 > -0.3).
SHAPING = {"lazy": -0.3, "duplicate": -0.3, "invalid": -0.1, "no_program": -0.4}
@registry.sandbox("expr_inprocess")
class ExprInProcessSandbox:
    """Scores ``EXPR`` with the example's evaluator rules without running the program."""

    def __init__(self, **_: Any) -> None:
        pass

    def evaluate(self, program: Program, evaluator: Any = None, limits: Any = None, *,
                 cascade_thresholds: Any = None) -> EvalResult:
        ev = example_evaluator()
        text = expr_of(program.code)
        if text is None:
            return EvalResult(status="invalid", error="no EXPR = \"...\" line")
        visible = [x for x, _ in ev.VISIBLE]
        got = outputs(text, tuple(visible))
        feats = {"length": float(min(len(text), ev.MAX_LEN)),
                 "multiplications": 0.0 if got is None else float(text.count("*"))}
        if got is None:  # not an expression of the DSL: invalid, as a validation failure (shaped below)
            return EvalResult(status="invalid", error=f"{text!r} is not a DSL expression", features=feats)
        tests = [1.0 if g == y else 0.0 for g, (_, y) in zip(got, ev.VISIBLE, strict=True)]
        return EvalResult(score=sum(tests) / len(tests), tests=tests, features=feats,
                          artifacts={"expression": text})

    def close(self) -> None:
        pass


# -- one run -----------------------------------------------------------------------------
def run_config(arm: str, args: argparse.Namespace, policy_dir: Path) -> dict[str, Any]:
    import yaml

    config = yaml.safe_load((EXAMPLE / "config.yaml").read_text())
    config["run"].update(workers=1, children_per_parent=args.group, max_duplicate_streak=10**9)
    train = config["train"]
    objective, reward, cluster = ARMS[arm]
    train.update(policy=str(policy_dir), every=10**9 if objective is None else args.every,
                 objective=dict(objective or {"type": "grpo"}), trainer={"learning_rate": args.lr},
                 reward=args.reward or reward, max_samples=args.samples,
                 shaping=None if args.no_shaping else dict(SHAPING))
    if cluster is not None:
        train["cluster"] = cluster
    if objective is not None and objective["type"] == "passk":
        train["shaping"] = None  # pass@k's estimator takes rewards of exactly 0 or 1: copies keep the copied reward
    return config


def arm_reward(arm: str, args: dict[str, Any]) -> str:
    """The reward an arm trains on, as :func:`run_config` sets it (the tables' reward column)."""
    objective, reward, _cluster = ARMS[arm]
    shaped = not args.get("no_shaping") and not (objective is not None and objective["type"] == "passk")
    return f"{args.get('reward') or reward}, {'shaped' if shaped else 'unshaped'}"


def plan_run(arm: str, seed: int, args: argparse.Namespace, policy_dir: Path, tmp: Path) -> dict[str, Any]:
    """Write one run's config; return what a worker needs to run it."""
    import yaml

    name = f"{arm.replace(' ', '_')}-{seed}"
    cfg_path, db = tmp / f"{name}.yaml", tmp / f"{name}.sqlite"
    cfg_path.write_text(yaml.safe_dump(run_config(arm, args, policy_dir)))
    argv = [str(EXAMPLE), "--config", str(cfg_path), "--db", str(db), "--iterations", str(args.samples),
            "--seed", str(seed), "--sandbox", args.sandbox, "--no-progress"]
    return {"arm": arm, "seed": seed, "db": str(db), "argv": argv, "budget": args.checkpoints}


def worker(plans: list[dict[str, Any]]) -> None:
    """Run ``qdevolve run`` in this process for each plan (one import of torch for all)."""
    import contextlib
    import io

    import torch

    from qdevolve.cli.evolve import run as run_command

    torch.set_num_threads(1)
    for plan in plans:
        t0 = time.time()
        error = None
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                run_command.main(args=plan["argv"], standalone_mode=False)
        except Exception as exc:  # noqa: BLE001 - reported per run, the other runs go on
            error = f"{type(exc).__name__}: {exc}"
        print(json.dumps({"arm": plan["arm"], "seed": plan["seed"], "wall_s": time.time() - t0, "error": error}),
              flush=True)


def run_all(plans: list[dict[str, Any]], jobs: int) -> list[dict[str, Any]]:
    """Spread the plans over ``jobs`` worker processes (``worker_pool``); measure each finished run."""
    by_key = {(p["arm"], p["seed"]): p for p in plans}
    runs: list[dict[str, Any]] = []

    def on_result(done: dict[str, Any]) -> None:
        plan = by_key[(done["arm"], done["seed"])]
        if done["error"]:
            runs.append({"arm": done["arm"], "seed": done["seed"], "error": done["error"]})
            print(f"{done['arm']:12s} seed {done['seed']}: FAILED {done['error']}", flush=True)
            return
        r = measure(Path(plan["db"]), [int(c) for c in plan["budget"].split(",")])
        r.update(arm=done["arm"], seed=done["seed"], wall_s=done["wall_s"])
        runs.append(r)
        c = r["curves"]
        print(f"{r['arm']:12s} seed {r['seed']}: top50 {c['top50'][-1]:.3f} correct cells "
              f"{c['correct_cells'][-1]:.0f} distinct correct {c['distinct_correct'][-1]:.0f} classes "
              f"{c['semantic_classes'][-1]:.0f} best {c['best'][-1]:.2f} ({r['wall_s']:.0f} s)", flush=True)

    run_in_workers(Path(__file__).resolve(), plans, jobs, on_result)
    order = {(p["arm"], p["seed"]): i for i, p in enumerate(plans)}
    return sorted(runs, key=lambda r: order[(r["arm"], r["seed"])])


# -- main -----------------------------------------------------------------------------------
def available(arm: str) -> str | None:
    """``None`` when the joined loop can run ``arm`` here, else the reason it cannot."""
    obj = ARMS[arm][0]
    if obj is None:
        return None
    try:
        registry.objective.get(obj["type"])
    except Exception as exc:  # noqa: BLE001 - any lookup failure means "not on this install"
        return f"objective '{obj['type']}' is not registered here ({type(exc).__name__})"
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=2400,
                    help="policy samples per run, copies included (every arm the same: compute-matched)")
    ap.add_argument("--checkpoints", default="400,800,1200,1600", help="evaluation counts the curves are read at")
    ap.add_argument("--no-shaping", action="store_true", help="no lazy/duplicate penalty (copies keep their reward)")
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--every", type=int, default=64, help="trainer step every N evaluations")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--group", type=int, default=8, help="children per parent prompt (the RL group)")
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--reward", default=None, help="one train.reward for every arm (default: binary for the "
                    "counting objectives ips/rare/passk, score for the others)")
    ap.add_argument("--bases", choices=("per-seed", "shared"), default="per-seed",
                    help="one pre-trained base per seed (cached), or seed 0's base for every seed")
    ap.add_argument("--sft-steps", type=int, default=None,
                    help="pre-training steps of the bases (default: the tiny policy's; another value is another cache entry)")
    ap.add_argument("--sandbox", default="expr_inprocess", help="expr_inprocess (default), local, bwrap, ...")
    ap.add_argument("--jobs", type=int, default=2, help="runs in parallel")
    ap.add_argument("--out", default=str(RESULTS / "joined.md"))
    ap.add_argument("--keep", default=None, help="keep the run databases in this directory")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--merge", default=None, help="render one table from these reports (a,b,...; e.g. one per seed)")
    args = ap.parse_args()
    if args.worker is not None:
        worker(json.loads(args.worker))
        return
    if args.merge:
        merge([Path(p) for p in args.merge.split(",")], Path(args.out))
        return
    seeds = [int(s) for s in args.seeds.split(",")]
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = sorted(set(arms) - set(ARMS))
    if unknown:
        raise SystemExit(f"--arms: unknown arm(s) {', '.join(unknown)}; known: {', '.join(ARMS)}")
    from qdevolve.evolve.training import REWARDS

    if args.reward is not None and args.reward not in REWARDS:
        raise SystemExit(f"--reward {args.reward}: this joined loop offers {', '.join(REWARDS)}")
    skipped = {a: why for a in arms if (why := available(a)) is not None}
    arms = [a for a in arms if a not in skipped]

    import torch

    from qdevolve.rl.tiny import tiny_policy_dir

    torch.set_num_threads(1)
    t_build = time.time()
    extra = {} if args.sft_steps is None else {"sft_steps": args.sft_steps}
    bases = {s: tiny_policy_dir("expr_edit", seed=s if args.bases == "per-seed" else 0, **extra) for s in seeds}
    build_s = time.time() - t_build
    check = operator_check(bases[seeds[0]])
    print(f"base mutation operator (seed {seeds[0]}): mean TV between parents "
          f"{check['mean_tv_between_parents']:.2f}", flush=True)
    for row in check["rows"]:
        print(f"  parent {row['parent']:8s} valid {row['valid']:.2f} equal-parent {row['equal_parent']:.2f} "
              f"correct {row['correct']:.2f} distinct {row['distinct']}", flush=True)
    t0, cpu0, load0 = time.time(), _children_cpu(), os.getloadavg()
    with tempfile.TemporaryDirectory() as d:
        where = Path(args.keep) if args.keep else Path(d)
        where.mkdir(parents=True, exist_ok=True)
        plans = [plan_run(arm, seed, args, bases[seed], where) for seed in seeds for arm in arms]
        runs = run_all(plans, max(1, args.jobs))
    total, cpu = time.time() - t0, _children_cpu() - cpu0
    report = {"args": vars(args), "seeds": seeds, "arms": arms, "skipped": skipped, "runs": runs,
              "rewards": {a: arm_reward(a, vars(args)) for a in arms},
              "operator_check": check, "wall_s": total, "cpu_s": cpu,
              "load_start": list(load0), "load_end": list(os.getloadavg()), "base_build_s": build_s, "uptime": _uptime(),
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).with_suffix(".json").write_text(json.dumps(report, indent=1))
    Path(args.out).write_text(render(report))
    print(render(report))

    print(f"wrote {args.out} and {Path(args.out).with_suffix('.json')}")


def merge(paths: list[Path], out: Path) -> None:
    """One report from several (the runs of each; wall and CPU seconds summed; first and last load)."""
    reports = [json.loads(p.read_text()) for p in paths]
    report = dict(reports[0])
    report["runs"] = [r for rep in reports for r in rep["runs"]]
    report["seeds"] = list(dict.fromkeys(s for rep in reports for s in rep["seeds"]))
    report["runs"] = [r for r in report["runs"] if "error" not in r or not any(  # a failed run that was rerun
        o["arm"] == r["arm"] and o["seed"] == r["seed"] and "error" not in o for o in report["runs"])]
    report["wall_s"] = sum(rep["wall_s"] for rep in reports)
    report["cpu_s"] = sum(rep.get("cpu_s", 0.0) for rep in reports)
    report["base_build_s"] = sum(rep["base_build_s"] for rep in reports)
    report["load_end"] = reports[-1].get("load_end", [])
    report["date"] = f"{reports[0]['date']} to {reports[-1]['date']}"
    report["rewards"] = {r["arm"]: arm_reward(r["arm"], report["args"]) for r in report["runs"]}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(report, indent=1))
    out.write_text(render(report))
    print(render(report))


def _children_cpu() -> float:
    """CPU seconds (user + system) of the finished worker processes."""
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


if __name__ == "__main__":
    main()
