"""The joined loop in the currency of ``bench_samples.py``: quality per model call, the frozen
tiny policy against the same policy trained during the run.

Where the tiny trained policy applies (expression tasks), every arm runs qdevolve with the
``policy`` mutation operator over the same cached ``expr_edit`` base (``--policy-seed``, one
base for every arm and seed), the task's own config (MAP-Elites over length and
multiplications, uniform parent selection, 8 children per parent prompt: one RL group), the
same seeds, the same number of model calls (``--calls``, enforced by ``train.max_samples``)
and the same concurrency (1 evaluation worker; the joined listener keeps 2 parent prompts in
flight, the same for every arm). Arms:

* ``frozen``: the base, never trained (the listener runs, its trainer never steps);
* ``grpo``: trained during the run with GRPO, a step every ``train.every`` (32) evaluations,
  with the example's previous settings (``PREVIOUS``: lr 1e-3, no KL anchor, the score as the
  reward, no shaping);
* ``ips`` (diversity objective): the example's previous objective and settings, IPS on the raw
  score over semantic classes;
* ``grpo+all`` and ``ips+all``: the same objectives with the suite's three design changes
  together (``benchmarks/suite_engine.py``, ``all``): a KL anchor to the base and a lower
  learning rate (``trainer: {learning_rate: 3e-4, beta: 0.1}``), the clipped improvement over
  the parent as the reward (``reward: improvement_clipped``), and penalties for a child that
  copies any stored program or repeats a stored semantic class (-0.3) or fails (-0.4).
  ``ips+all`` is the example's default since this benchmark measured it (BENCHMARKS.md); every
  arm states its settings, so the arms do not change when the example's defaults do;
* diagnostics, one change each: ``grpo+shaped`` (copies earn -0.3: ``train.shaping``),
  ``frozen+serial`` and ``grpo+serial`` (one parent prompt in flight, ``run.max_pending: 1``,
  so trainer steps cannot overlap).

**A model call is one completion of the policy**, evaluated or not: a child that is evaluated
(its rollout linked to the new program), a child that copies its parent or a stored program
(not evaluated again: its rollout is stored with ``metadata.duplicate_of``), and a completion
that gives no program (a failed child). Every arm counts the same way. Call numbers follow the
rollouts' storage order (``rollouts.seq``; the seed is call 0); a call that produced no new
evaluated program adds no point to the curves but advances the call axis. An expression the
DSL rejects is evaluated and scores 0, as the example's evaluator scores it. The benchmark also
counts the completions the backend generated; a difference from the stored rollouts (a copy of
a program still being evaluated, or the plan in flight when the budget stopped the run) is
reported per arm, and curves are cut at ``--calls``.

Reported per task, with ``samples_report.py``'s code (imported): median over seeds of the best
score and of the top-10 mean against calls (table and plot, min-max bands), the calls each
arm's median curve needs to reach every other arm's final median best; and, per arm, trainer
steps, evaluated / copied / failed calls and the mean reward of the rollouts of each policy
version (the policy's reward over steps).

    nice -n 10 python benchmarks/bench_policy_samples.py            # default budget (BENCHMARKS.md)
    python benchmarks/bench_policy_samples.py --tasks expr_evolution --arms frozen,grpo --seeds 2 --calls 64
    python benchmarks/bench_policy_samples.py --report-only          # rebuild report and plot from --out
    python benchmarks/bench_policy_samples.py --arms grpo+shaped,frozen+serial,grpo+serial --seeds 3   # diagnostics
    python benchmarks/bench_policy_samples.py --arms frozen,grpo,ips   # the example's previous settings only
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _raw import start_meta, write_raw  # noqa: E402
from samples_report import plot, read_records, report_lines  # noqa: E402
from worker_pool import run_in_workers  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# arm -> its objective (None: the frozen base, never stepped) and its changes to the train / run sections
# the example's settings before ips+all became its default (lr 1e-3, no KL, the score as reward, no shaping)
PREVIOUS: dict[str, Any] = {"reward": "score", "trainer": {"learning_rate": 1e-3}, "shaping": {}}
ARMS: dict[str, dict[str, Any]] = {
    "frozen": {"objective": None, "train": PREVIOUS},
    "grpo": {"objective": {"type": "grpo"}, "train": PREVIOUS},
    "ips": {"objective": {"type": "ips", "key": "cluster", "reward": "raw"}, "train": PREVIOUS},
    # diagnostics, one change each: copies penalised (ThetaEvolve's -0.3 for a lazy or duplicate child) ...
    "grpo+shaped": {"objective": {"type": "grpo"},
                    "train": {**PREVIOUS, "shaping": {"lazy": -0.3, "duplicate": -0.3}}},
    # ... or one parent prompt in flight (no two trainer steps overlap), on both sides of the comparison
    "frozen+serial": {"objective": None, "train": PREVIOUS, "run": {"max_pending": 1}},
    "grpo+serial": {"objective": {"type": "grpo"}, "train": PREVIOUS, "run": {"max_pending": 1}},
}
# the suite's "+all" (benchmarks/suite_engine.py): KL anchor and lr 3e-4, clipped improvement, copies and failures priced
ALL_CHANGES: dict[str, Any] = {
    "reward": "improvement_clipped",
    "trainer": {"learning_rate": 3e-4, "beta": 0.1},
    "shaping": {"lazy": -0.3, "duplicate": -0.3, "same_class": -0.3, "error": -0.4, "no_program": -0.4},
}
ARMS["grpo+all"] = {"objective": {"type": "grpo"}, "train": ALL_CHANGES}
ARMS["ips+all"] = {"objective": dict(ARMS["ips"]["objective"]), "train": ALL_CHANGES}
NEVER = 10**9  # train.every of the frozen arm: no trainer step within any budget
WINDOWS = 8  # the budget in this many windows of calls: reward and copies over the run


def run_config(task: Path, arm: str, calls: int, seed: int, policy_dir: str) -> tuple[Any, Any]:
    """The example and RunConfig of one arm: the task's config, its ``train`` section with the arm's objective."""
    from qdevolve.evolve.setup.example import load_example
    from qdevolve.evolve.training import apply_policy_options

    ex = load_example(task)
    train = dict(ex.config.train or {})
    spec = ARMS[arm]
    objective = spec["objective"]
    train.update(policy=policy_dir, objective=dict(objective or {"type": "grpo"}), max_samples=calls,
                 **copy.deepcopy(spec.get("train", {})))
    if objective is None:
        train["every"] = NEVER
    cfg = ex.config.with_overrides(iterations=calls * 4, workers=1, seed=seed, max_duplicate_streak=NEVER,
                                   sandbox={"type": "policy_expr", "task": str(task)}, train=train,
                                   **spec.get("run", {}))
    return ex, apply_policy_options(cfg, policy=None, objective=None, every=None)


def run_one(task: Path, arm: str, calls: int, seed: int, policy_dir: str, out: Path) -> dict[str, Any]:
    """One arm, one seed, in this process: run, then write ``evaluations.jsonl`` and ``run.json`` into ``out``."""
    import policy_tasks  # noqa: F401  (registers the policy_expr sandbox)
    import torch

    from qdevolve.db import LineageStore
    from qdevolve.evolve.core.engine import Evolution

    torch.manual_seed(seed)
    out.mkdir(parents=True, exist_ok=True)
    db = out / "qd.sqlite"
    db.unlink(missing_ok=True)
    ex, cfg = run_config(task, arm, calls, seed, policy_dir)
    store = LineageStore(db)
    t0 = time.perf_counter()
    evo = Evolution.start(ex, cfg, store, progress=False)
    generated = _count_generations(evo.listener.backend.inner)
    try:
        evo.run()
    finally:
        evo.close()
    wall = time.perf_counter() - t0
    summary = {"arm": arm, "seed": seed, "wall_s": wall, "generated": generated["n"], **read_run(store, calls)}
    with (out / "evaluations.jsonl").open("w") as f:
        for call, score in summary.pop("records"):
            f.write(json.dumps({"call": call, "score": score}) + "\n")
    (out / "run.json").write_text(json.dumps(summary, indent=1))
    return summary


def _count_generations(backend: Any) -> dict[str, int]:
    """Wrap ``backend.generate`` so every completion it returns is counted (the benchmark's own count)."""
    counter = {"n": 0}
    inner = backend.generate

    async def generate(requests: list[Any]) -> list[list[Any]]:
        out = await inner(requests)
        counter["n"] += sum(len(c) for c in out)
        return out

    backend.generate = generate
    return counter


def read_run(store: Any, calls: int, windows: int = WINDOWS) -> dict[str, Any]:
    """The run's calls in rollout order: ``records`` [(call, score)] and the counts of each kind.

    Call k (1-based) is the k-th stored rollout. A rollout adds a record when it produced a
    new evaluated program (not a copy: no ``duplicate_of``) with a finite score; the seed is
    call 0. Counts are over the first ``calls`` rollouts; per window of ``calls / windows``
    calls: the mean reward of its rollouts and the share of copies."""
    run_id = store.latest_run_id()
    rows = store.execute(
        "SELECT r.seq, r.policy_version, r.reward, json_extract(r.metadata, '$.duplicate_of'), e.status, e.score "
        "FROM rollouts r LEFT JOIN evaluations e ON e.program_id = r.program_id WHERE r.run_id = :run ORDER BY r.seq",
        run=run_id)
    records = [(0, float(s)) for (s,) in store.execute(
        "SELECT e.score FROM programs p JOIN evaluations e ON e.program_id = p.id "
        "WHERE p.run_id = :run AND p.operator = 'seed' AND e.status = 'ok'", run=run_id) if s is not None]
    kinds = {"evaluated": 0, "copies": 0, "failed": 0}
    by_version: dict[int, list[float]] = {}
    width = max(1, -(-calls // windows))
    win_reward: list[list[float]] = [[] for _ in range(windows)]
    win_copies = [0] * windows
    for call, (_seq, version, reward, dup, status, score) in enumerate(rows, start=1):
        kind = "copies" if dup else "evaluated" if status == "ok" and score is not None else "failed"
        if kind == "evaluated":
            records.append((call, float(score)))
        if reward is not None:
            by_version.setdefault(int(version or 0), []).append(float(reward))
        if call > calls:
            continue
        kinds[kind] += 1
        w = min(windows - 1, (call - 1) // width)
        win_copies[w] += kind == "copies"
        if reward is not None:
            win_reward[w].append(float(reward))
    versions = store.policy_versions(run_id)
    return {"records": records, "rollouts": len(rows), **kinds,
            "trainer_steps": max(0, len(versions) - 1),
            "versions_sampled": len(by_version),
            "window_calls": width,
            "reward_by_window": [statistics.fmean(w) if w else None for w in win_reward],
            "copies_by_window": [c / width for c in win_copies],
            "reward_by_version": {v: statistics.fmean(rs) for v, rs in sorted(by_version.items())}}


# -- processes ------------------------------------------------------------------------------
def worker(plans: list[dict[str, Any]]) -> None:
    """Run the plans one after another in this process (torch imported once); one JSON line each."""
    import contextlib
    import io

    import torch

    torch.set_num_threads(1)
    for p in plans:
        t0 = time.time()
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                r = run_one(Path(p["task"]), p["arm"], p["calls"], p["seed"], p["policy"], Path(p["out"]))
            r["error"] = None
        except Exception as exc:  # noqa: BLE001 - reported per run, the other runs go on
            r = {"arm": p["arm"], "seed": p["seed"], "error": f"{type(exc).__name__}: {exc}",
                 "wall_s": time.time() - t0}
        r["task"] = p["task_name"]
        print(json.dumps(r), flush=True)


def run_all(plans: list[dict[str, Any]], jobs: int) -> list[dict[str, Any]]:
    """Spread the plans round-robin over ``jobs`` worker processes; their summaries as they finish."""
    runs: list[dict[str, Any]] = []

    def show(r: dict[str, Any]) -> None:
        runs.append(r)
        print(f"{r['task']} {r['arm']} seed {r['seed']}: " + (f"FAILED {r['error']}" if r["error"] else
              f"{r['rollouts']} calls ({r['generated']} generated), {r['evaluated']} evaluated, "
              f"{r['copies']} copies, {r['failed']} failed, {r['trainer_steps']} steps, "
              f"{r['wall_s']:.0f} s"), flush=True)

    run_in_workers(Path(__file__).resolve(), plans, jobs, show, env={"PYTHONPATH": str(ROOT)})
    return runs


# -- report ---------------------------------------------------------------------------------
def _med(xs: list[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return statistics.median(vals) if vals else None


def arm_lines(task: str, runs: list[dict[str, Any]], arms: list[str]) -> list[str]:
    """Per arm: how its calls were spent, trainer steps, reward and copies over the run."""
    lines = ["How each arm spent its calls (mean over seeds, within the budget): evaluated (a new program), copies "
             "(of the parent or a stored program: not evaluated again), failed (no program); rollouts stored and "
             "completions generated per run (min-max over seeds); trainer steps and policy versions sampled "
             "(mean); per window of calls, the mean reward of the rollouts and the share of copies (median over "
             "seeds).", "",
             "| arm | evaluated | copies | failed | rollouts stored | generated | trainer steps | versions sampled "
             "| reward per window | copies per window |", "|---|---|---|---|---|---|---|---|---|---|"]
    for arm in arms:
        rs = [r for r in runs if r["task"] == task and r["arm"] == arm and not r.get("error")]
        if not rs:
            continue
        mean = {k: statistics.fmean(r[k] for r in rs) for k in ("evaluated", "copies", "failed", "trainer_steps",
                                                                  "versions_sampled")}
        n_w = min(len(r["reward_by_window"]) for r in rs)
        rew = [_med([r["reward_by_window"][i] for r in rs]) for i in range(n_w)]
        cop = [_med([r["copies_by_window"][i] for r in rs]) for i in range(n_w)]
        fmt = lambda xs: " ".join("-" if x is None else f"{x:.2f}" for x in xs)  # noqa: E731
        lines.append(f"| {arm} | {mean['evaluated']:.0f} | {mean['copies']:.0f} | {mean['failed']:.0f} | "
                     f"{min(r['rollouts'] for r in rs)}-{max(r['rollouts'] for r in rs)} | "
                     f"{min(r['generated'] for r in rs)}-{max(r['generated'] for r in rs)} | "
                     f"{mean['trainer_steps']:.1f} | {mean['versions_sampled']:.1f} | {fmt(rew)} | {fmt(cop)} |")
    width = next((r["window_calls"] for r in runs if r["task"] == task and not r.get("error")), None)
    return lines + ([f"(Windows of {width} calls.)"] if width else []) + [""]


def load_runs(out: Path, tasks: list[str], arms: list[str], seeds: int | None = None) -> tuple[dict, list[dict[str, Any]]]:
    """Records and summaries of the runs stored under ``out/<task>/<arm>/seed<s>/`` (s < ``seeds``: all if None)."""
    results: dict[str, dict[str, list]] = {}
    runs: list[dict[str, Any]] = []
    for task in tasks:
        tdir = out / task.replace(":", "_")
        for arm in arms:
            dirs = sorted(d for d in (tdir / arm).glob("seed*") if (d / "run.json").exists()
                          and (seeds is None or int(d.name[4:]) < seeds))
            if dirs:
                results.setdefault(task, {})[arm] = [read_records(d / "evaluations.jsonl") for d in dirs]
                for d in dirs:
                    runs.append({**json.loads((d / "run.json").read_text()), "task": task, "error": None})
    return results, runs


def render(out: Path, tasks: list[str], arms: list[str], calls: int, head: list[str], plot_path: Path,
           minutes: dict[str, float] | None = None, seeds: int | None = None) -> str:
    results, runs = load_runs(out, tasks, arms, seeds)
    lines, summaries = list(head), {}
    for task in tasks:
        if task not in results:
            continue
        reference = next((a for a in arms if a != "frozen" and a in results[task]), "frozen")
        task_lines, summaries[task] = report_lines(task, results[task], calls, reference=reference)
        lines += task_lines + arm_lines(task, runs, arms)
        if minutes and task in minutes:
            lines += [f"Wall time for this task (every arm, every seed): {minutes[task]:.1f} min.", ""]
    if summaries:
        plot(summaries, {t: results[t] for t in summaries}, calls, plot_path)
        lines += [f"Plot (best score and top-10 mean against model calls): `{os.path.relpath(plot_path, ROOT)}`.", ""]
    return "\n".join(lines) + "\n"


def top10_records(records: list[tuple[int, float]]) -> list[list[float]]:
    """The records that entered the running top 10 when they were evaluated, in call order.

    Both curves (best score and top-10 mean at every call budget) depend only on these: a record
    that is not among the 10 best so far never counts again, so the raw file keeps the curves
    exactly with a few dozen points per run."""
    kept, top = [], []
    for call, score in sorted(records, key=lambda r: r[0]):
        if len(top) < 10 or score > top[-1]:
            kept.append([call, score])
            top = sorted([*top, score], reverse=True)[:10]
    return kept


def raw_data(out: Path, tasks: list[str], arms: list[str], calls: int, seeds: int, policy_seed: int,
             minutes: dict[str, float], loads: list[float]) -> dict[str, Any]:
    """The per-run figures every table and plot of this benchmark uses (``benchmarks/reports/policy_samples.py``)."""
    keep = ("evaluated", "copies", "failed", "rollouts", "generated", "trainer_steps", "versions_sampled",
            "window_calls", "reward_by_window", "copies_by_window", "wall_s")
    per_run = []
    for task in tasks:
        for arm in arms:
            dirs = sorted((out / task.replace(":", "_") / arm).glob("seed*"))
            for d in dirs:
                if not (d / "run.json").exists() or int(d.name[4:]) >= seeds:
                    continue
                summary = json.loads((d / "run.json").read_text())
                per_run.append({"task": task, "arm": arm, "seed": int(d.name[4:]),
                                **{k: summary.get(k) for k in keep},
                                "records": top10_records(read_records(d / "evaluations.jsonl"))})
    return {"seeds": list(range(seeds)), "tasks": tasks, "arms": arms, "calls": calls, "policy_seed": policy_seed,
            "arm_settings": {a: ARMS[a] for a in arms},  # objective and train changes: what each arm's reward is
            "minutes_per_task": minutes, "load_at_task_boundaries": loads, "runs": per_run}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", default="expr_evolution,suite:t30,suite:t33", help="expr_evolution and/or suite:tNN")
    ap.add_argument("--arms", default="frozen,ips,grpo+all,ips+all")
    ap.add_argument("--calls", type=int, default=2048, help="model calls (policy completions) per run")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--policy-seed", type=int, default=0, help="seed of the cached expr_edit base (every arm)")
    ap.add_argument("--jobs", type=int, default=2, help="runs in parallel")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out" / "policy_samples")
    ap.add_argument("--report", type=Path, default=ROOT / "benchmarks" / "results" / "policy_samples.md")
    ap.add_argument("--plot", type=Path, default=ROOT / "docs" / "bench_policy_samples.png")
    ap.add_argument("--report-only", action="store_true", help="run nothing: rebuild from the runs under --out")
    ap.add_argument("--raw", default="policy_samples",
                    help="raw result name: benchmarks/results/NAME.json (rendered by benchmarks/report.py)")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker is not None:
        worker(json.loads(args.worker))
        return
    tasks = [t for t in args.tasks.split(",") if t]
    arms = [a for a in args.arms.split(",") if a]
    unknown = sorted(set(arms) - set(ARMS))
    if unknown:
        raise SystemExit(f"--arms: unknown arm(s) {', '.join(unknown)}; known: {', '.join(ARMS)}")
    if args.report_only:
        head = [f"# bench_policy_samples report rebuilt from {os.path.relpath(args.out, ROOT)} (arms {args.arms}, "
                f"seeds 0-{args.seeds - 1})", ""]
        text = render(args.out, tasks, arms, args.calls, head, args.plot, seeds=args.seeds)
        args.report.write_text(text)
        print(text)
        return
    import policy_tasks

    from qdevolve.rl.tiny import tiny_policy_dir

    measured = start_meta()  # the tree measured (the raw file's commit and dirty flag)
    policy = str(tiny_policy_dir("expr_edit", seed=args.policy_seed))  # built once (about 16 min) if not cached
    started, loads, minutes = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), [os.getloadavg()[0]], {}
    for task in tasks:
        task_dir = policy_tasks.prepare_task(task, args.out)
        t0 = time.monotonic()
        plans = [{"task": str(task_dir), "task_name": task, "arm": arm, "seed": s, "calls": args.calls,
                  "policy": policy, "out": str(args.out / task.replace(":", "_") / arm / f"seed{s}")}
                 for s in range(args.seeds) for arm in arms]
        run_all(plans, max(1, args.jobs))
        minutes[task] = (time.monotonic() - t0) / 60
        loads.append(os.getloadavg()[0])
    head = [f"# bench_policy_samples ({started})", "",
            f"Command: `python benchmarks/bench_policy_samples.py --tasks {args.tasks} --arms {args.arms} "
            f"--calls {args.calls} --seeds {args.seeds} --policy-seed {args.policy_seed} --jobs {args.jobs}` "
            f"({os.cpu_count()} cores, load average {min(loads):.1f}-{max(loads):.1f} at the task boundaries).", ""]
    args.report.parent.mkdir(parents=True, exist_ok=True)
    text = render(args.out, tasks, arms, args.calls, head, args.plot, minutes, seeds=args.seeds)
    args.report.write_text(text)
    print(text)
    command = (f"nice -n {os.nice(0)} " if os.nice(0) else "") + " ".join(["python", "benchmarks/bench_policy_samples.py", *sys.argv[1:]])
    raw = write_raw(args.raw, raw_data(args.out, tasks, arms, args.calls, args.seeds, args.policy_seed, minutes,
                                       loads),
                    command=command, meta=measured)
    print(f"wrote {args.report}, {args.plot} and {raw}")


if __name__ == "__main__":
    main()
