"""Sample efficiency: the quality a fixed number of model calls buys, qdevolve against
OpenEvolve and ShinkaEvolve, with the model taken out of the comparison.

Every framework is driven by the same neutral mutation server (``mutation_server.py``: an
OpenAI-compatible server on 127.0.0.1 that finds the parent program in the prompt, applies
a seeded stochastic edit and replies with the whole program, ignoring the rest of the
prompt), on the same task evaluator, with the same number of model calls (``--calls``) and
the same number of requests in flight (``--concurrency``), for ``--seeds`` seeds each (seed
s: server seed s and framework seed s). Each run is a process of its own
(``samples_drivers.py``); ShinkaEvolve runs under the Python of its own environment
(``--shinka-python``, default ``.shinka-env/bin/python``, as ``.ci/run`` builds it).

Reported per task: the median best score and top-10 mean against calls (a table, and a
PNG plot with min-max bands over seeds), and the calls each framework's median curve needs
to reach every framework's final median best. Scores are the evaluators' ``combined_score``
(larger is better; for the minimisation problems it is minus the bound).

    python benchmarks/bench_samples.py [--tasks circle_packing,erdos_min_overlap,autocorrelation_c1]
        [--calls 60] [--seeds 5] [--concurrency 4] [--workers 2]
        [--frameworks qdevolve,openevolve,shinka] [--variant NAME=JSON]...

``--variant NAME=JSON`` adds a qdevolve arm with RunConfig overrides (one search choice
changed at a time), e.g. ``--variant islands='{"archive": {"type": "islands"}}'``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from samples_report import plot, read_records, report_lines  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent


def _start_server(seed: int, log: Path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, str(HERE / "mutation_server.py"), "--seed", str(seed), "--log", str(log)],
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().split()
    if len(line) < 2 or line[0] != "READY":
        proc.kill()
        raise RuntimeError("mutation server did not start")
    return proc, line[1]


def run_one(fw: str, task: Path, seed: int, args: argparse.Namespace, out: Path, overrides: str = "") -> dict:
    """One framework, one seed: its records and how many calls it made."""
    out.mkdir(parents=True, exist_ok=True)
    server, url = _start_server(seed, out / "server.jsonl")
    python = args.shinka_python if fw == "shinka" else sys.executable
    cmd = [python, str(HERE / "samples_drivers.py"), fw, "--task", str(task), "--url", url, "--calls", str(args.calls),
           "--concurrency", str(args.concurrency), "--workers", str(args.workers), "--seed", str(seed),
           "--out", str(out)] + (["--qd-overrides", overrides] if overrides else [])
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.run_timeout,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        error = None if proc.returncode == 0 else (proc.stderr or proc.stdout)[-1500:]
    except subprocess.TimeoutExpired:
        error = f"timed out after {args.run_timeout} s"
    finally:
        server.terminate()
        server.wait(timeout=10)
    wall = time.monotonic() - t0
    calls = sum(1 for _ in (out / "server.jsonl").open()) if (out / "server.jsonl").exists() else 0
    return {"framework": fw, "seed": seed, "wall_s": wall, "calls": calls, "error": error,
            "records": read_records(out / "evaluations.jsonl")}


def report_from_disk(args: argparse.Namespace) -> None:
    """The report of every arm and seed found under ``--out/<task>/<arm>/seed*/``."""
    lines, summaries, results = [], {}, {}
    for task_name in args.tasks.split(","):
        task_dir = args.out / task_name
        arms = sorted(d.name for d in task_dir.iterdir() if d.is_dir()) if task_dir.is_dir() else []
        results[task_name] = {arm: [read_records(s / "evaluations.jsonl") for s in sorted((task_dir / arm).glob("seed*"))
                                    if (s / "evaluations.jsonl").exists()] for arm in arms}
        results[task_name] = {a: r for a, r in results[task_name].items() if r}
        if results[task_name]:
            task_lines, summaries[task_name] = report_lines(task_name, results[task_name], args.calls)
            lines += task_lines
    args.report.write_text("\n".join([f"# bench_samples report rebuilt from {args.out}", ""] + lines) + "\n")
    if summaries:
        plot(summaries, results, args.calls, args.plot)
    print("\n".join(lines))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", default="circle_packing,erdos_min_overlap,autocorrelation_c1")
    ap.add_argument("--frameworks", default="qdevolve,openevolve,shinka")
    ap.add_argument("--calls", type=int, default=60, help="model calls per run (the budget)")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--concurrency", type=int, default=4, help="model requests in flight, every framework")
    ap.add_argument("--workers", type=int, default=2, help="evaluation workers (qdevolve, ShinkaEvolve)")
    ap.add_argument("--variant", action="append", default=[], help="NAME=JSON: an extra qdevolve arm")
    ap.add_argument("--shinka-python", default=str(ROOT / ".shinka-env" / "bin" / "python"))
    ap.add_argument("--run-timeout", type=int, default=900)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out" / "samples")
    ap.add_argument("--report", type=Path, default=ROOT / "benchmarks" / "results" / "samples.md")
    ap.add_argument("--plot", type=Path, default=ROOT / "docs" / "bench_samples.png")
    ap.add_argument("--report-only", action="store_true",
                    help="run nothing: rebuild the report and plot from the runs stored under --out")
    args = ap.parse_args()
    if args.report_only:
        report_from_disk(args)
        return
    arms = [(fw, "") for fw in args.frameworks.split(",") if fw]
    arms += [(f"qdevolve+{v.split('=', 1)[0]}", v.split("=", 1)[1]) for v in args.variant]
    loads, started = [os.getloadavg()[0]], time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    raw, results, summaries, lines, failures = {}, {}, {}, [], []
    for task_name in args.tasks.split(","):
        task = ROOT / "examples" / task_name
        t_task = time.monotonic()
        results[task_name] = {}
        for arm, overrides in arms:
            fw = arm.split("+")[0]
            runs = []
            for seed in range(args.seeds):
                r = run_one(fw, task, seed, args, args.out / task_name / arm / f"seed{seed}", overrides)
                loads.append(os.getloadavg()[0])
                print(f"{task_name} {arm} seed {seed}: {r['calls']} calls, {len(r['records'])} evaluations, "
                      f"{r['wall_s']:.0f} s" + (f", FAILED: {r['error'].splitlines()[-1]}" if r["error"] else ""),
                      flush=True)
                raw.setdefault(task_name, {}).setdefault(arm, []).append({k: v for k, v in r.items()})
                if r["error"] and not r["records"][1:]:
                    failures.append(f"{arm} on {task_name} seed {seed}: {r['error'].strip().splitlines()[-1]}")
                    continue
                runs.append(r["records"])
            if runs:
                results[task_name][arm] = runs
        task_lines, summaries[task_name] = report_lines(task_name, results[task_name], args.calls)
        minutes = (time.monotonic() - t_task) / 60
        lines += task_lines + [f"Wall time for this task (every arm, every seed): {minutes:.1f} min.", ""]
    head = [f"# bench_samples ({started})", "",
            f"Command: `python benchmarks/bench_samples.py --tasks {args.tasks} --frameworks {args.frameworks} "
            f"--calls {args.calls} --seeds {args.seeds} --concurrency {args.concurrency} --workers {args.workers}"
            + "".join(f" --variant '{v}'" for v in args.variant) + f"` ({os.cpu_count()} cores, load average "
            f"{min(loads):.1f}-{max(loads):.1f} during the runs).", ""]
    if failures:
        head += ["Runs that failed (no evaluated child):", ""] + [f"- {f}" for f in failures] + [""]
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text("\n".join(head + lines) + "\n")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "samples.json").write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                                       "runs": raw, "summaries": summaries}))
    if any(results[t] for t in results):
        plot({t: s for t, s in summaries.items() if results[t]}, results, args.calls, args.plot)
    print("\n".join(head + lines))
    print(f"wrote {args.report}, {args.plot}, {args.out / 'samples.json'}")


if __name__ == "__main__":
    main()
