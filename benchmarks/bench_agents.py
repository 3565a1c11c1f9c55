"""Darwin Gödel agents: does the open-ended archive find an agent that beats the seed agent on
held-out tasks, and does it beat the greedy ablation, at equal budget?

For each seed and each arm (``dgm``: the open-ended archive with DGM parent selection;
``greedy``: always the latest best agent, DGM's own ablation; optionally ``hgm``), the agents
example runs offline with the same number of child agents. Every agent is scored with the same
per-task call budget, so "equal budget" holds for the seed agent too. Reported:

* the held-out mean normalised improvement of the best agent so far (best by the *scoring*
  tasks, what selection saw) against children evaluated, from the stored metrics;
* the final best agent and the seed agent re-scored on the held-out tasks ``--repeats`` times
  with fresh mutation draws (a salt), because one scoring is a noisy sample.

Each claim (the archive's final best agent beats the seed agent on held-out tasks; it beats
the greedy arm's) is the paired difference over seeds with a 90 % bootstrap interval
(:mod:`qdevolve.agents.interval`): it **holds** only when the interval lies above 0, **holds in
the mean** when the mean difference is positive but the interval contains 0, and **does not
hold** otherwise. Run under ``nice -n 10``::

    nice -n 10 python benchmarks/bench_agents.py --out benchmarks/results/agents.md --plot docs/bench_agents.png
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _raw import Interval, start_meta, verdict, write_raw  # noqa: E402

import qdevolve.agents  # noqa: E402,F401  (registers 'self' and 'agents')
import qdevolve.selection  # noqa: E402,F401  (registers 'hgm' and 'greedy')
from qdevolve import registry  # noqa: E402
from qdevolve.agents import AgentScorer, ScoringSettings, heldout_curve, load_tasks  # noqa: E402
from qdevolve.agents.interval import difference, paired_difference  # noqa: E402
from qdevolve.db import LineageStore  # noqa: E402
from qdevolve.evolve.core import Evolution  # noqa: E402
from qdevolve.evolve.setup.example import load_example  # noqa: E402
from qdevolve.sandbox import resolve_sandbox  # noqa: E402

EXAMPLE = ROOT / "examples" / "agents"


def run_arm(work: Path, arm: str, seed: int, iterations: int, workers: int) -> dict[str, Any]:
    """One run of the example with selection ``arm``; its curve, best agent and seed agent."""
    ex = work / f"{arm}-{seed}"
    shutil.copytree(EXAMPLE, ex)
    cfg = yaml.safe_load((ex / "config.yaml").read_text())
    cfg["run"].update(iterations=iterations, seed=seed, workers=workers)
    cfg["selection"] = {"type": arm}
    cfg["run"]["executor_options"]["heldout_draws"] = 1  # the run's own verdict: this benchmark re-scores itself
    (ex / "config.yaml").write_text(yaml.safe_dump(cfg))
    example = load_example(ex)
    db = work / f"{arm}-{seed}.sqlite"
    t0 = time.time()
    evo = Evolution.start(example, example.config, LineageStore(db), progress=False)
    try:
        summary = evo.run()
    finally:
        evo.close()
    with LineageStore(db, create=False) as store:
        curve = heldout_curve(store, evo.run_id)
        best = store.get_program(summary.best_program_id) if summary.best_program_id else None
        programs = [p for _, p, _ in store.iter_programs(evo.run_id)]
        seed_prog = next(p for p in programs if p.operator == "seed")
        statuses = dict(summary.by_status)
    parents = {p.parent_ids[0] for p in programs if p.parent_ids}
    return {"arm": arm, "seed": seed, "curve": curve, "best_code": best.code if best else seed_prog.code,
            "best_is_seed": best is None or best.id == seed_prog.id, "seed_code": seed_prog.code,
            "wall_s": time.time() - t0, "statuses": statuses, "best_score": summary.best_score,
            "best_generation": best.generation if best else 0, "parents": len(parents),
            "failed": sum(v for k, v in statuses.items() if k != "ok")}


def heldout_scorer(box: Any, spec: dict[str, Any], options: dict[str, Any], salt: str) -> AgentScorer:
    """A scorer over the held-out tasks only (scored as the objective, with another salt)."""
    spec = options["tasks"]
    tasks = [dataclasses.replace(t, heldout=False) for t in load_tasks(EXAMPLE / "tasks", spec) if t.heldout]
    settings = ScoringSettings.from_options({k: v for k, v in options.items() if k != "tasks"})
    return AgentScorer(tasks, settings, box, spec, salt=salt)


def rescore(code: str, box: Any, spec: dict[str, Any], options: dict[str, Any], seed: int,
            repeats: int) -> list[float]:
    """Held-out normalised improvement of ``repeats`` salted scorings (a failed one counts 0)."""
    values = []
    for r in range(repeats):
        result = heldout_scorer(box, spec, options, f"bench-{seed}-{r}").score(code)
        values.append(float(result.score or 0.0) if result.ok else 0.0)
    return values


def at(curve: list[tuple[int, float, float | None]], n: int) -> float | None:
    """The best agent's held-out figure after ``n`` children (the last point at or before ``n``)."""
    value = None
    for k, _best, heldout in curve:
        if k > n:
            break
        value = heldout
    return value


def mean_sd(values: list[float]) -> str:
    if not values:
        return "-"
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):.4f} ± {sd:.4f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=20, help="child agents per run")
    ap.add_argument("--arms", default="dgm,greedy", help="selection rules to compare (dgm, greedy, hgm)")
    ap.add_argument("--repeats", type=int, default=3, help="salted re-scorings of the final agents")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "agents.md")
    ap.add_argument("--plot", type=Path, default=None, help="write a PNG of held-out against iterations")
    ap.add_argument("--raw", default=None,
                    help="raw result name: benchmarks/results/NAME.json (default: the stem of --out; rendered by "
                         "benchmarks/report.py)")
    ap.add_argument("--from-json", type=Path, default=None,
                    help="render the report from a previous run's raw figures (its .json) instead of running")
    args = ap.parse_args()
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    if args.from_json is not None:
        raw = json.loads(args.from_json.read_text())
        seeds = {int(k): float(v) for k, v in raw["seed_final"].items()}
        print(render(args, arms, raw["runs"], seeds, raw.get("started", "?"), tuple(raw.get("load0", [0.0])),
                     tuple(raw.get("load1", [0.0])), float(raw.get("elapsed_s", 0.0))))
        return
    measured = start_meta()  # the tree measured (the raw file's commit and dirty flag)
    load0, t0, started = os.getloadavg(), time.time(), time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    options = yaml.safe_load((EXAMPLE / "config.yaml").read_text())["run"]["executor_options"]
    runs: list[dict[str, Any]] = []
    spec = resolve_sandbox({"type": "auto"})
    box = registry.sandbox.create(spec)
    seed_final: dict[int, float] = {}
    seed_draws: dict[int, list[float]] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="bench-agents-") as tmp:
            for seed in range(args.seeds):
                for arm in arms:
                    r = run_arm(Path(tmp), arm, seed, args.iterations, args.workers)
                    r["final_draws"] = rescore(r["best_code"], box, spec, options, seed, args.repeats)
                    r["final"] = statistics.fmean(r["final_draws"])
                    if seed not in seed_final:
                        seed_draws[seed] = rescore(r["seed_code"], box, spec, options, seed, args.repeats)
                        seed_final[seed] = statistics.fmean(seed_draws[seed])
                    r["seed_final"], r["seed_draws"] = seed_final[seed], seed_draws[seed]
                    runs.append(r)
                    print(f"seed {seed} {arm:7s} {r['wall_s']:6.1f} s  best score {r['best_score']:.4f}  "
                          f"held-out final {r['final']:.4f} (seed agent {r['seed_final']:.4f})  {r['statuses']}",
                          flush=True)
    finally:
        box.close()
    load1, elapsed = os.getloadavg(), time.time() - t0
    report = render(args, arms, runs, seed_final, started, load0, load1, elapsed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report)
    raw = [{k: v for k, v in r.items() if k not in ("best_code", "seed_code")} for r in runs]
    command = (f"nice -n {os.nice(0)} " if os.nice(0) else "") + " ".join(
        ["python", "benchmarks/bench_agents.py", *sys.argv[1:]])
    path = write_raw(args.raw or args.out.stem, {"runs": raw, "seed_final": seed_final, "started": started, "load0": load0,
                                "load1": load1, "elapsed_s": elapsed, "arms": arms, "iterations": args.iterations,
                                "repeats": args.repeats, "workers": args.workers},
                     command=command, seeds=list(range(args.seeds)), meta=measured)
    print(f"wrote {path}")
    print(report)
    if args.plot is not None:
        plot(args.plot, arms, runs, seed_final, args.iterations)


def render(args: argparse.Namespace, arms: list[str], runs: list[dict[str, Any]], seed_final: dict[int, float],
           started: str, load0: tuple[float, ...], load1: tuple[float, ...], elapsed: float) -> str:
    checkpoints = sorted({0, *range(5, args.iterations + 1, 5), args.iterations})
    lines = ["# Darwin Gödel agents: archive vs greedy vs seed agent on held-out tasks", "",
             f"- command: `nice -n 10 python benchmarks/bench_agents.py --seeds {args.seeds} --iterations "
             f"{args.iterations} --arms {','.join(arms)} --repeats {args.repeats} --workers {args.workers}`",
             f"- date: {started}; wall {elapsed / 60:.1f} min; load average {load0[0]:.1f} at the start, "
             f"{load1[0]:.1f} at the end; {platform.machine()}, {os.cpu_count()} CPUs, Python "
             f"{platform.python_version()}",
             "- figures: mean normalised improvement on the held-out tasks (line_fit, wave_fit) of the best "
             "agent by scoring-task score; mean ± sd over seeds", "",
             "## Best agent's held-out figure against children evaluated (stored metrics, one scoring)", "",
             "| arm | " + " | ".join(f"n={n}" for n in checkpoints) + " |",
             "|---|" + "---:|" * len(checkpoints)]
    for arm in arms:
        cells = []
        for n in checkpoints:
            vals = [v for r in runs if r["arm"] == arm for v in [at(r["curve"], n)] if v is not None]
            cells.append(mean_sd(vals))
        lines.append(f"| {arm} | " + " | ".join(cells) + " |")
    lines += ["", f"## Final agents re-scored on the held-out tasks ({args.repeats} salted scorings each)", "",
              "| arm | final best agent | seed agent (equal budget) | runs whose mean is above the seed agent's | "
              "best agent = seed | best agent's generation | parents expanded | failed children | wall s / run |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    finals: dict[str, float] = {}
    for arm in arms:
        rs = [r for r in runs if r["arm"] == arm]
        finals[arm] = statistics.fmean([r["final"] for r in rs])
        wins = sum(r["final"] > r["seed_final"] for r in rs)
        lines.append(f"| {arm} | {mean_sd([r['final'] for r in rs])} | {mean_sd([r['seed_final'] for r in rs])} | "
                     f"{wins}/{len(rs)} | {sum(r['best_is_seed'] for r in rs)}/{len(rs)} | "
                     f"{statistics.fmean([r['best_generation'] for r in rs]):.1f} | "
                     f"{statistics.fmean([r['parents'] for r in rs]):.1f} | "
                     f"{statistics.fmean([r['failed'] for r in rs]):.1f} | "
                     f"{statistics.fmean([r['wall_s'] for r in rs]):.0f} |")
    lines += ["", "## Claims (paired difference over seeds, 90 % bootstrap interval)", ""]
    dgm = [r for r in runs if r["arm"] == "dgm"]
    if not dgm:
        lines.append("The `dgm` arm was not run: no verdict.")
        return "\n".join(lines) + "\n"
    lines.append(claim("archive (dgm) beats the seed agent on held-out tasks",
                       {r["seed"]: r for r in dgm}, {s_: {"final": v, "final_draws": seed_draws_of(runs, s_)}
                                                     for s_, v in seed_final.items()}))
    greedy = [r for r in runs if r["arm"] == "greedy"]
    if greedy:
        lines.append(claim("archive (dgm) beats the greedy ablation", {r["seed"]: r for r in dgm},
                           {r["seed"]: r for r in greedy}))
    lines += ["", measured(runs, arms)]
    return "\n".join(lines) + "\n"


def seed_draws_of(runs: list[dict[str, Any]], seed: int) -> list[float]:
    """The seed agent's salted draws of ``seed`` (its mean alone in figures from before draws were kept)."""
    r = next(r for r in runs if r["seed"] == seed)
    return list(r.get("seed_draws") or [r["seed_final"]])


def claim(what: str, a: dict[int, dict[str, Any]], b: dict[int, dict[str, Any]]) -> str:
    """One claim line: **holds** when the interval of the difference lies above 0, **holds in
    the mean** when only its mean is above 0, **does not hold** otherwise. Over seeds the
    difference is paired (one per seed; two-stage bootstrap: seeds, then each seed's salted
    draws); with one seed it is the difference of the two agents' draws (independent resampling)."""
    keys = sorted(set(a) & set(b))
    if len(keys) >= 2:
        d = paired_difference([(x[k].get("final_draws") or [x[k]["final"]], y[k].get("final_draws") or [y[k]["final"]])
                               for k in keys for x, y in [(a, b)]])
        mean, lo, hi = d.estimate, d.lo, d.hi
        over = f"over {len(keys)} seeds (seeds, then draws, resampled)"
    else:
        d = difference(a[keys[0]]["final_draws"], b[keys[0]]["final_draws"])
        mean, lo, hi = d.estimate, d.lo, d.hi
        over = f"over {d.n_a} and {d.n_b} draws of one seed"
    verdict = verdict_word(mean, lo, hi)
    span = "no interval" if lo is None or hi is None else f"90 % interval [{lo:+.4f}, {hi:+.4f}]"
    noise = "" if lo is None or hi is None else ": within noise" if lo <= 0 <= hi else ": beyond noise"
    means = " vs ".join(f"{statistics.fmean(x[k]['final'] for k in keys):.4f}" for x in (a, b))
    return f"- {what}: **{verdict}** ({means}; difference {mean:+.4f}, {span} {over}{noise})"


def verdict_word(mean: float, lo: float | None, hi: float | None) -> str:
    """``holds`` / ``holds in the mean`` / ``does not hold`` for "difference > 0" (``_raw.verdict``)."""
    return verdict(Interval(mean, lo, hi, 0.9, 0), 0.0, "greater")


def measured(runs: list[dict[str, Any]], arms: list[str]) -> str:
    """What the runs measured, per arm, in numbers only."""
    parts = []
    for arm in arms:
        rs = [r for r in runs if r["arm"] == arm]
        finals = [r["final"] for r in rs]
        sd = statistics.stdev(finals) if len(finals) > 1 else 0.0
        parts.append(f"{arm}: best agent {statistics.fmean(r['best_generation'] for r in rs):.1f} self-edits from "
                     f"the seed, {statistics.fmean(r['parents'] for r in rs):.1f} parents expanded, "
                     f"{statistics.fmean(r['failed'] for r in rs):.1f} failed children, final held-out figure "
                     f"sd {sd:.4f} over {len(rs)} seeds")
    draws = [v for vs in {r["seed"]: r.get("seed_draws", []) for r in runs}.values() for v in vs]  # once per seed
    if len(draws) > 1:
        parts.append(f"seed agent: held-out draws sd {statistics.stdev(draws):.4f} over {len(draws)} salted scorings")
    return "Measured: " + "; ".join(parts) + "."


def plot(path: Path, arms: list[str], runs: list[dict[str, Any]], seed_final: dict[int, float],
         iterations: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    xs = list(range(iterations + 1))
    for arm in arms:
        ys = []
        for n in xs:
            vals = [v for r in runs if r["arm"] == arm for v in [at(r["curve"], n)] if v is not None]
            ys.append(statistics.fmean(vals) if vals else float("nan"))
        ax.plot(xs, ys, label=f"{arm} (best agent)")
    ax.axhline(statistics.fmean(seed_final.values()), color="grey", linestyle="--", label="seed agent (re-scored)")
    ax.set_xlabel("child agents evaluated")
    ax.set_ylabel("held-out normalised improvement")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
