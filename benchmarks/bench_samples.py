"""Sample efficiency: the quality a fixed number of model calls buys, qdevolve against
OpenEvolve and ShinkaEvolve, with the model taken out of the comparison.

Every framework is driven by the same neutral mutation server (``mutation_server.py``: an
OpenAI-compatible server on 127.0.0.1 that finds the parent program in the prompt, applies
a seeded stochastic edit and replies with the whole program, ignoring the rest of the
prompt), on the same task evaluator, with the same number of model calls (``--calls``) and
the same number of requests in flight (``--concurrency``), for ``--seeds`` seeds each (seed
s: server seed s and framework seed s). Each run is a process of its own
(``samples_drivers.py``, which also states the search settings each framework gets);
ShinkaEvolve runs under the Python of its own environment (``--shinka-python``, default
``$QDEVOLVE_SHINKA_PYTHON`` or ``.shinka-env/bin/python``, as ``.ci/run`` builds it).

Raw results go to ``benchmarks/results/samples.json`` (``--raw``) after **every** run: the
``meta`` of the benchmark-report convention, the plan (tasks, arms, seeds) and per run its
evaluated ``(call, score)`` pairs up to the budget, the calls it made, its wall time, load and
error. A stopped run still renders; ``--resume`` skips the (task, arm, seed) runs the raw
file already holds. Runs are ordered task by task, and within a task seed by seed over
every arm, so complete tasks (and equal seeds per arm) come first. The tables
(``benchmarks/reports/samples.py``: medians, calls-to-reach, bootstrap intervals, verdicts)
are a pure function of that file.

    nice -n 10 python benchmarks/bench_samples.py [--tasks circle_packing,erdos_min_overlap,
        autocorrelation_c1,heilbronn_triangle] [--calls 60] [--seeds 10] [--concurrency 4]
        [--workers 2] [--jobs 1] [--frameworks qdevolve,openevolve,shinka] [--variant NAME=JSON]...

``--variant NAME=JSON`` adds a qdevolve arm with RunConfig overrides (one search choice
changed at a time), e.g. ``--variant islands='{"archive": {"type": "islands", "inner": "$example"}}'``.
``--jobs J`` runs J runs at a time (each with its own server); calls, not wall time, are the
measured quantity.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from samples_drivers import SETTINGS  # noqa: E402
from samples_report import read_records  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
TASKS = "circle_packing,erdos_min_overlap,autocorrelation_c1,heilbronn_triangle"
HELD_OUT = ("heilbronn_triangle",)


def _start_server(seed: int, log: Path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, str(HERE / "mutation_server.py"), "--seed", str(seed), "--log", str(log)],
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().split()
    if len(line) < 2 or line[0] != "READY":
        proc.kill()
        raise RuntimeError("mutation server did not start")
    return proc, line[1]


def run_one(fw: str, task: Path, seed: int, args: argparse.Namespace, out: Path, overrides: str = "") -> dict:
    """One framework, one seed: its records (cut at the budget) and how many calls it made."""
    if out.exists():  # a stopped earlier run's files (its store above all) must not join this run's records
        shutil.rmtree(out)
    out.mkdir(parents=True)
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
    records = sorted(r for r in read_records(out / "evaluations.jsonl") if r[0] <= args.calls)
    return {"calls_made": calls, "wall_s": round(wall, 1), "error": error,
            "loadavg": round(os.getloadavg()[0], 2), "records": [[c, s] for c, s in records]}


def _git(*a: str) -> str:
    try:
        return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def _version(dist: str, python: str | None = None) -> str | None:
    if python:
        try:
            out = subprocess.run([python, "-c", f"from importlib.metadata import version; print(version({dist!r}))"],
                                 capture_output=True, text=True, timeout=60)
            return out.stdout.strip() or None
        except (OSError, subprocess.SubprocessError):
            return None
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def start_meta(args: argparse.Namespace, arms: list[str]) -> dict:
    """The convention's ``meta`` (commit, dirty, date, command, loadavg, machine, seeds), taken at the start.

    The dirty flag ignores ``benchmarks/results/`` (outputs, not the code measured)."""
    status = _git("status", "--porcelain", "--", ".", ":(exclude)benchmarks/results")
    return {"commit": _git("rev-parse", "HEAD").strip() or None, "dirty": bool(status.strip()),
            "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "command": shlex.join(["python", "benchmarks/bench_samples.py", *sys.argv[1:]]),
            "loadavg": [round(x, 2) for x in os.getloadavg()],
            "machine": {"cpu_count": os.cpu_count(), "machine": platform.machine(), "python": platform.python_version(),
                        "torch": _version("torch"), "openevolve": _version("openevolve"),
                        "shinka-evolve": _version("shinka-evolve", args.shinka_python) if "shinka" in arms else None},
            "seeds": list(range(args.seeds)), "nice": os.nice(0)}  # the niceness it ran at (0: not niced)


class RawFile:
    """``benchmarks/results/samples.json``, rewritten atomically after every run (never loses a run)."""

    def __init__(self, path: Path, data: dict) -> None:
        self.path, self.data, self.lock = path, data, threading.Lock()

    def add(self, run: dict) -> None:
        with self.lock:
            self.data["runs"] = [r for r in self.data["runs"]
                                 if (r["task"], r["arm"], r["seed"]) != (run["task"], run["arm"], run["seed"])] + [run]
            self.data["meta"]["loadavg_runs"] = [min(r["loadavg"] for r in self.data["runs"]),
                                                 max(r["loadavg"] for r in self.data["runs"])]
            self.data["meta"]["finished"] = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".json.tmp")
            tmp.write_text(json.dumps(self.data, indent=None, separators=(",", ":")) + "\n")
            tmp.replace(self.path)


def add_reference(raw_path: Path, main_path: Path) -> None:
    """Make an ablation raw file self-contained: copy into it the runs of the main file's arms
    (qdevolve's default, OpenEvolve, ShinkaEvolve) on its tasks and seeds, so its table (each
    variant against each framework, ``benchmarks/reports/samples_ablation.py``) reads one file."""
    data, main = json.loads(raw_path.read_text()), json.loads(main_path.read_text())
    seeds = set(data["meta"]["seeds"])
    # every variant arm the file holds, those of an earlier (stopped) plan too: their tasks show as missing
    data["arms"] = [*dict.fromkeys([*data["arms"], *(r["arm"] for r in data["runs"] if r["arm"].startswith("qdevolve+"))])]
    before = set(data.get("copied_from", {}).get("arms", data.get("competitors", [])))  # a second call re-copies
    own = [r for r in data["runs"] if r["arm"] in data["arms"] and r["arm"] not in before and r["seed"] in seeds]
    measured = {r["arm"] for r in own}  # an arm the ablation ran itself (its own default) is not copied over
    copied = [r for r in main["runs"] if r["task"] in data["tasks"] and r["seed"] in seeds and r["arm"] in main["arms"]
              and r["arm"] not in measured]
    competitors = [a for a in main["arms"] if a != main.get("reference", "qdevolve")]
    variants = [*dict.fromkeys([main.get("reference", "qdevolve"),
                                *(a for a in data["arms"] if a not in before and a not in competitors)])]
    data.update(runs=own + copied, variants=variants, competitors=competitors,
                copied_from={"file": str(main_path.relative_to(ROOT)) if main_path.is_relative_to(ROOT) else str(main_path),
                             "commit": main["meta"]["commit"], "date": main["meta"]["date"],
                             "arms": sorted({r["arm"] for r in copied})},
                settings={**main["settings"], **data["settings"]})
    data["meta"]["machine"] = {**main["meta"]["machine"], **{k: v for k, v in data["meta"]["machine"].items() if v}}
    data["arms"] = [*dict.fromkeys([*data["variants"], *competitors])]
    data["raw_name"] = raw_path.stem  # the provenance line names the file it is read from
    raw_path.write_text(json.dumps(data, separators=(",", ":")) + "\n")


def merge(raw_path: Path, part_path: Path) -> None:
    """Add the runs of ``part_path`` (the same plan's arms, run by a second process on other tasks into
    its own file) to ``raw_path``; its meta is kept under ``meta["parts"]`` (commit, date, command, load)."""
    data, part = json.loads(raw_path.read_text()), json.loads(part_path.read_text())
    if part["arms"] != data["arms"] or part["calls"] != data["calls"] or part["meta"]["seeds"] != data["meta"]["seeds"]:
        raise SystemExit(f"--merge: {part_path} has another plan (arms, calls or seeds) than {raw_path}")
    keys = {(r["task"], r["arm"], r["seed"]) for r in part["runs"]}
    data["runs"] = [r for r in data["runs"] if (r["task"], r["arm"], r["seed"]) not in keys] + part["runs"]
    data["tasks"] = [*dict.fromkeys([*data["tasks"], *part["tasks"]])]
    data["held_out"] = [*dict.fromkeys([*data.get("held_out", []), *part.get("held_out", [])])]
    pm = part["meta"]
    data["meta"].setdefault("parts", []).append({k: pm.get(k) for k in ("commit", "dirty", "date", "finished", "command",
                                                                           "loadavg", "loadavg_runs")} | {"tasks": part["tasks"]})
    loads = [x for x in (data["meta"].get("loadavg_runs", []) + (pm.get("loadavg_runs") or []))]
    if loads:
        data["meta"]["loadavg_runs"] = [min(loads), max(loads)]
    raw_path.write_text(json.dumps(data, separators=(",", ":")) + "\n")


def plot_raw(raw_path: Path, png: Path) -> None:
    """The plot ``benchmarks/report.py`` keeps in ``docs/bench_samples.png``, drawn from ``raw_path`` into ``png``."""
    sys.path.insert(0, str(ROOT / "benchmarks" / "reports"))
    import samples as renderer

    for series in renderer.plots(json.loads(raw_path.read_text())).values():
        renderer.draw(png, series)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", default=TASKS)
    ap.add_argument("--frameworks", default="qdevolve,openevolve,shinka")
    ap.add_argument("--calls", type=int, default=60, help="model calls per run (the budget)")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--concurrency", type=int, default=4, help="model requests in flight, every framework")
    ap.add_argument("--workers", type=int, default=2, help="evaluation workers (qdevolve, ShinkaEvolve)")
    ap.add_argument("--jobs", type=int, default=1, help="runs at a time")
    ap.add_argument("--variant", action="append", default=[], help="NAME=JSON: an extra qdevolve arm")
    ap.add_argument("--held-out", default=",".join(HELD_OUT), help="tasks no design choice was tuned on")
    ap.add_argument("--shinka-python", default=os.environ.get("QDEVOLVE_SHINKA_PYTHON")
                    or str(ROOT / ".shinka-env" / "bin" / "python"))
    ap.add_argument("--run-timeout", type=int, default=900)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out" / "samples")
    ap.add_argument("--raw", type=Path, default=ROOT / "benchmarks" / "results" / "samples.json")
    ap.add_argument("--resume", action="store_true", help="keep the runs already in --raw and skip them")
    ap.add_argument("--add-reference", type=Path, metavar="MAIN_RAW",
                    help="run nothing: copy MAIN_RAW's default, OpenEvolve and ShinkaEvolve runs into the --raw ablation file")
    ap.add_argument("--merge", type=Path, metavar="PART_RAW",
                    help="run nothing: add PART_RAW's runs (same plan, other tasks) to --raw")
    ap.add_argument("--plot", type=Path, metavar="PNG", help="run nothing: plot the curves of --raw into PNG")
    args = ap.parse_args()
    if args.plot:
        plot_raw(args.raw, args.plot)
        return
    if args.merge:
        merge(args.raw, args.merge)
        return
    if args.add_reference:
        add_reference(args.raw, args.add_reference)
        return
    tasks = [t for t in args.tasks.split(",") if t]
    arms = [(fw, "") for fw in args.frameworks.split(",") if fw]
    arms += [(f"qdevolve+{v.split('=', 1)[0]}", v.split("=", 1)[1]) for v in args.variant]
    for t in tasks:
        if not (ROOT / "examples" / t / "evaluator.py").exists():
            raise SystemExit(f"--tasks: examples/{t}/evaluator.py does not exist")
    old = json.loads(args.raw.read_text()) if args.resume and args.raw.exists() else None
    meta = start_meta(args, [a for a, _ in arms])
    if old:
        meta = {**old["meta"], "seeds": meta["seeds"], "resumed": [*old["meta"].get("resumed", []), meta["date"]],
                "commits": sorted(({old["meta"]["commit"], meta["commit"]} | set(old["meta"].get("commits", []))) - {None})}
    raw = RawFile(args.raw, {
        "meta": meta, "calls": args.calls, "concurrency": args.concurrency, "workers": args.workers,
        "tasks": [*dict.fromkeys([*(old or {}).get("tasks", []), *tasks])], "held_out": [t for t in args.held_out.split(",") if t], "reference": "qdevolve",
        "arms": [a for a, _ in arms],
        "overrides": {**(old or {}).get("overrides", {}), **{a: o for a, o in arms if o}},  # a resumed file keeps its arms'
        "settings": {**(old or {}).get("settings", {}),
                     **{a: SETTINGS[a.split("+")[0]] + (f" Override: {o}" if o else "") for a, o in arms}},
        "runs": old["runs"] if old else []})
    done = {(r["task"], r["arm"], r["seed"]) for r in raw.data["runs"]}
    plan = [(t, seed, arm, o) for t in tasks for seed in range(args.seeds) for arm, o in arms
            if (t, arm, seed) not in done]

    def one(item: tuple[str, int, str, str]) -> None:
        t, seed, arm, overrides = item
        r = run_one(arm.split("+")[0], ROOT / "examples" / t, seed, args, args.out / t / arm / f"seed{seed}", overrides)
        raw.add({"task": t, "arm": arm, "seed": seed, **r})
        best = max((s for _, s in r["records"]), default=None)
        print(f"{time.strftime('%H:%M:%S')} {t} {arm} seed {seed}: {r['calls_made']} calls, {len(r['records'])} "
              f"evaluations, best {best}, {r['wall_s']:.0f} s, load {r['loadavg']}"
              + (f", FAILED: {r['error'].strip().splitlines()[-1]}" if r["error"] else ""), flush=True)

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        list(pool.map(one, plan))
    print(f"wrote {args.raw}; render: python benchmarks/reports/samples.py --write")


if __name__ == "__main__":
    main()
