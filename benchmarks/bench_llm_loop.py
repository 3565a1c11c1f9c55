"""qdevolve against OpenEvolve on the same example and the same local scripted model server.

Both frameworks evolve ``examples/circle_packing`` with SEARCH/REPLACE diffs from the same
scripted OpenAI-compatible server (``qdevolve.testing.scripted_server``, a real HTTP server
on 127.0.0.1) at equal model concurrency: ``--concurrency C`` model requests in flight for
both (qdevolve: ``backend.concurrency = run.max_pending = C`` generation slots, separate
from its ``--workers`` evaluation slots; OpenEvolve: ``evaluator.parallel_evaluations = C``
worker processes, each waiting for its reply and then evaluating), at server latencies
``--latencies`` (default 0 s and 1 s per reply). Reported per run: iterations/s, successful
evaluations/s (children whose evaluation ended ``ok``), children salvaged (qdevolve:
``metadata.salvaged``), qdevolve's mean model requests in flight, and controller CPU per
evaluation (the controller process only; sandbox processes and OpenEvolve's worker
processes excluded alike). Each framework runs in its own process; with ``--repeats N`` the
two alternate N times per latency and the ratio of each back-to-back pair is reported.

Counted alike for both frameworks: a child counts when its evaluation ran and ended ``ok``.
qdevolve's children are read from its store (which keeps every evaluation); OpenEvolve's
from its evaluator calls, through a thin wrapper evaluator that appends one line per call
to a log before returning the example's own result (OpenEvolve's database is not a count: it
deletes programs pushed out of their MAP-Elites cell). The seed's evaluation is excluded
from both counts. Both timers span the same work: from constructing the framework's run
(set-up and the seed's evaluation included) to the end of the run; imports are outside both.

qdevolve evaluates with integrity on (the candidate in its own isolated process, the
evaluator untouchable) on ``--backend`` (default ``local``) and, by default, the warm path
(``--warm``: a pre-imported template per worker forks each evaluation; ``--cold``: a fresh
sandbox per evaluation). OpenEvolve ``exec``s candidates in its worker processes (no
isolation).

    python benchmarks/bench_llm_loop.py [--iterations 80] [--concurrency 8] [--workers 2]
        [--backend local|bwrap] [--warm|--cold] [--repeats 3] [--script evolve|sloppy:0.4]

``--script sloppy:F`` makes a fraction F of the scripted diffs slip as real models' replies
do (indentation dropped, SEARCH lines re-spaced, a block or a whole program instead of a
diff): what each framework salvages from them shows in the ``ok`` column.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "circle_packing"


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def run_qdevolve(url: str, iterations: int, workdir: Path, concurrency: int, workers: int,
                 sandbox: dict | None = None) -> dict:
    from qdevolve.db import LineageStore
    from qdevolve.evolve.core.engine import Evolution
    from qdevolve.evolve.setup.example import load_example

    ex = load_example(EXAMPLE)
    cfg = ex.config.with_overrides(
        iterations=iterations, workers=workers, max_pending=concurrency, seed=0,
        sandbox=sandbox or {"type": "auto"},
        mutation=[{"type": "diff", "weight": 1.0}],
        backend={"type": "openai", "api_base": url, "model": "scripted", "timeout_s": 60, "retries": 2,
                 "concurrency": concurrency})
    _import_plugins(cfg)  # imports outside the timer, as OpenEvolve's (its modules load at import)
    c0, t0 = _cpu(), time.perf_counter()  # set-up and seed evaluation inside the timer, as OpenEvolve's
    store = LineageStore(workdir / "qd.sqlite")
    evo = Evolution.start(ex, cfg, store, progress=False)
    gauge = _InFlight(evo.backend)
    evo.run()
    wall, cpu = time.perf_counter() - t0, _cpu() - c0
    gauge.stop()
    boxes = list(getattr(evo.executor, "_sandboxes", {}).values())  # what the workers really used
    used = [bool(getattr(b, "warm", False)) for b in boxes] or [bool((sandbox or {}).get("warm"))]
    warm = " warm" if all(used) else " cold" if not any(used) else " warm/cold"
    evo.close()
    evaluated = store.execute("SELECT COUNT(*) FROM evaluations e JOIN programs p ON p.id = e.program_id "
                              "WHERE p.operator != 'seed'")[0][0]
    ok = store.execute("SELECT COUNT(*) FROM evaluations e JOIN programs p ON p.id = e.program_id "
                       "WHERE p.operator != 'seed' AND e.status = 'ok'")[0][0]
    salvaged = store.execute("SELECT COUNT(*) FROM programs WHERE json_extract(metadata, '$.salvaged') "
                             "IS NOT NULL")[0][0]
    return {"framework": "qdevolve", "sandbox": evo.plugins.sandbox_type + warm, "iterations": evo.ledger.stored,
            "evaluated": evaluated, "successful": ok, "salvaged": salvaged, "wall_s": wall, "cpu_s": cpu,
            "model_concurrency": concurrency, "eval_workers": workers, "mean_in_flight": gauge.mean}


def _import_plugins(cfg) -> None:
    """Import the modules of the plugins the run names (they load lazily, through the registry's
    entry points, on the first ``get``: about 0.5 s of imports and metadata reads on this machine,
    which would otherwise fall inside qdevolve's timer and not OpenEvolve's). Builds nothing that
    the run keeps: the run constructs its own plugins inside the timer."""
    from qdevolve import registry
    from qdevolve.evolve.setup.validate import check_plugins

    check_plugins(cfg)
    for reg, spec in ((registry.backend, cfg.backend), (registry.sandbox, cfg.sandbox)):
        name = spec.get("type") if isinstance(spec, dict) else None
        if name and name != "auto":
            reg.get(name)


class _InFlight:
    """Time-averaged model requests in flight: wraps the backend's ``generate`` (bench only)."""

    def __init__(self, backend) -> None:
        self.backend, self.n, self.area, self.t0 = backend, 0, 0.0, time.perf_counter()
        self.last, self.end = self.t0, None
        inner = backend.generate

        async def generate(requests):
            self._step(len(requests))
            try:
                return await inner(requests)
            finally:
                self._step(-len(requests))

        backend.generate = generate

    def _step(self, d: int) -> None:
        now = time.perf_counter()
        self.area += self.n * (now - self.last)
        self.n, self.last = self.n + d, now

    def stop(self) -> None:
        self._step(0)
        self.end = self.last

    @property
    def mean(self) -> float:
        return self.area / max((self.end or self.last) - self.t0, 1e-9)


OE_CONFIG = """max_iterations: {n}
random_seed: 0
log_level: WARNING
diff_based_evolution: true
llm:
  api_base: "{url}"
  api_key: "scripted"
  models:
    - name: "scripted"
      weight: 1.0
  temperature: 0.7
  max_tokens: 4096
  timeout: 60
  retries: 2
database:
  num_islands: 1
  population_size: 1000
evaluator:
  timeout: 20
  cascade_evaluation: false
  parallel_evaluations: {concurrency}
"""


COUNTING_EVALUATOR = """# Written by bench_llm_loop: the example's evaluator, plus one log line per call.
import importlib.util, json, os

_spec = importlib.util.spec_from_file_location("bench_inner_evaluator", {inner!r})
_inner = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_inner)


def _log(ok):
    line = (json.dumps({{"ok": ok, "pid": os.getpid()}}) + "\\n").encode()
    fd = os.open({log!r}, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line)  # one O_APPEND write: lines from worker processes never interleave
    finally:
        os.close(fd)


def evaluate(program_path):
    try:
        result = _inner.evaluate(program_path)
    except BaseException:
        _log(False)
        raise
    _log(True)
    return result
"""


def count_evaluator_calls(log: Path) -> tuple[int, int]:
    """(calls, calls that returned) logged by the counting evaluator, the seed's (the first) excluded."""
    lines = [json.loads(ln) for ln in log.read_text().splitlines() if ln.strip()] if log.exists() else []
    children = lines[1:]  # OpenEvolve evaluates the seed once, before its first iteration
    return len(children), sum(1 for c in children if c["ok"])


def run_openevolve(url: str, iterations: int, workdir: Path, concurrency: int, workers: int,
                   sandbox: dict | None = None) -> dict:
    from openevolve import OpenEvolve
    from openevolve.config import load_config

    cfg_path = workdir / "oe_config.yaml"
    cfg_path.write_text(OE_CONFIG.format(n=iterations, url=url, concurrency=concurrency))
    log = workdir / "evaluator_calls.jsonl"
    evaluator = workdir / "counting_evaluator.py"
    evaluator.write_text(COUNTING_EVALUATOR.format(inner=str(EXAMPLE / "evaluator.py"), log=str(log)))
    config = load_config(str(cfg_path))
    c0, t0 = _cpu(), time.perf_counter()  # set-up and seed evaluation inside the timer, as qdevolve's
    controller = OpenEvolve(str(EXAMPLE / "initial_program.py"), str(evaluator), config,
                            output_dir=str(workdir / "oe_out"))
    asyncio.run(controller.run(iterations=iterations))
    wall, cpu = time.perf_counter() - t0, _cpu() - c0
    evaluated, ok = count_evaluator_calls(log)
    kept = sum(1 for p in controller.database.programs.values() if p.parent_id is not None)
    return {"framework": "openevolve", "sandbox": "none (in-process)", "iterations": iterations,
            "evaluated": evaluated, "successful": ok, "kept_in_database": kept, "salvaged": 0,
            "wall_s": wall, "cpu_s": cpu, "model_concurrency": concurrency, "eval_workers": concurrency}


def _child(framework: str, url: str, args: argparse.Namespace) -> dict:
    cmd = [sys.executable, __file__, "--child", framework, "--url", url, "--iterations", str(args.iterations),
           "--concurrency", str(args.concurrency), "--workers", str(args.workers), "--backend", args.backend]
    out = subprocess.run(cmd + (["--warm"] if args.warm else ["--cold"]), capture_output=True, text=True,
                         timeout=1800)
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    if out.returncode != 0 or not line:
        raise RuntimeError(f"{framework} failed:\n{out.stderr[-3000:]}")
    return json.loads(line[-1][len("RESULT "):])


def _rate(r: dict) -> float:
    return r["successful"] / r["wall_s"]


def _spread(values: list[float]) -> str:
    values = sorted(values)
    mid = values[len(values) // 2] if len(values) % 2 else 0.5 * (values[len(values) // 2 - 1] + values[len(values) // 2])
    return f"{mid:.2f}" if len(values) == 1 else f"{mid:.2f} ({values[0]:.2f}-{values[-1]:.2f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iterations", type=int, default=80)
    ap.add_argument("--latencies", default="0,1")
    ap.add_argument("--concurrency", type=int, default=8, help="model requests in flight, both frameworks")
    ap.add_argument("--workers", type=int, default=2, help="qdevolve sandbox workers")
    ap.add_argument("--backend", default="local", help="qdevolve sandbox backend: local, bwrap, docker or auto")
    warm = ap.add_mutually_exclusive_group()
    warm.add_argument("--warm", dest="warm", action="store_true", default=True,
                      help="warm sandbox path: a pre-imported template per worker forks each evaluation (default)")
    warm.add_argument("--cold", dest="warm", action="store_false", help="a fresh sandbox process per evaluation")
    ap.add_argument("--repeats", type=int, default=1, help="runs of each framework at each latency (interleaved)")
    ap.add_argument("--script", default="evolve",
                    help="scripted model: evolve (clean diffs) or sloppy[:fraction] (some diffs slip as real models' do)")
    ap.add_argument("--out", default=None, help="also write the printed report to this markdown file")
    ap.add_argument("--raw", default=None,
                    help="also write the per-run figures to benchmarks/results/NAME.json (benchmarks/report.py renders it)")
    ap.add_argument("--child", choices=["qdevolve", "openevolve"])
    ap.add_argument("--url")
    args = ap.parse_args()
    if args.child:
        sandbox = {"type": args.backend, **({"warm": True} if args.warm else {})}
        with tempfile.TemporaryDirectory() as d:
            fn = run_qdevolve if args.child == "qdevolve" else run_openevolve
            result = fn(args.url, args.iterations, Path(d), args.concurrency, args.workers, sandbox)
            print("RESULT " + json.dumps(result), flush=True)
        return
    from rich.console import Console
    from rich.table import Table

    rows, loads = [], [os.getloadavg()[0]]
    measured = None
    if args.raw:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from _raw import start_meta

        measured = start_meta()  # the tree measured (the raw file's commit and dirty flag)
    for latency in [float(x) for x in args.latencies.split(",")]:
        server = subprocess.Popen([sys.executable, "-m", "qdevolve.testing.scripted_server", "--script", args.script,
                                   "--latency", str(latency)], stdout=subprocess.PIPE, text=True)
        try:
            url = server.stdout.readline().split()[1]
            for rep in range(args.repeats):
                for fw in ("qdevolve", "openevolve"):
                    r = _child(fw, url, args)
                    r["latency_s"], r["repeat"] = latency, rep
                    rows.append(r)
                    loads.append(os.getloadavg()[0])
        finally:
            server.terminate()
            server.wait(timeout=10)
    t = Table(title=f"{args.iterations} iterations on circle_packing, model concurrency {args.concurrency}")
    cols = ("latency", "framework", "isolation", "model concurrency", "eval workers", "requests in flight (mean)",
            "iterations/s", "successful evals/s", "iterations / evaluated / ok", "salvaged",
            "kept in OpenEvolve's database", "controller CPU ms/eval")
    for c in cols:
        t.add_column(c)
    lines = [f"# bench_llm_loop ({time.strftime('%Y-%m-%d %H:%M')})", "",
             f"Command: `python benchmarks/bench_llm_loop.py --iterations {args.iterations} --concurrency "
             f"{args.concurrency} --workers {args.workers} --backend {args.backend} "
             f"{'--warm' if args.warm else '--cold'} --repeats {args.repeats} --script {args.script}` "
             f"({os.cpu_count()} cores, load average {min(loads):.1f}-{max(loads):.1f} during the runs, "
             "scripted server on 127.0.0.1).", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        inflight = r.get("mean_in_flight")
        vals = (f"{r['latency_s']:.0f} s", r["framework"], r["sandbox"], str(r["model_concurrency"]),
                str(r["eval_workers"]), "-" if inflight is None else f"{inflight:.1f}",
                f"{r['iterations'] / r['wall_s']:.2f}", f"{_rate(r):.2f}",
                f"{r['iterations']} / {r['evaluated']} / {r['successful']}", str(r["salvaged"]),
                str(r.get("kept_in_database", "-")),
                f"{1000 * r['cpu_s'] / max(r['iterations'], 1):.1f}")
        t.add_row(*vals)
        lines.append("| " + " | ".join(vals) + " |")
    lines.append("")
    for latency in sorted({r["latency_s"] for r in rows}):
        q = [_rate(r) for r in rows if r["latency_s"] == latency and r["framework"] == "qdevolve"]
        o = [_rate(r) for r in rows if r["latency_s"] == latency and r["framework"] == "openevolve"]
        ratios = [a / max(b, 1e-9) for a, b in zip(q, o, strict=True)]  # each repeat's pair, run back to back
        lines.append(f"At {latency:.0f} s latency: successful evaluations/s qdevolve {_spread(q)}, OpenEvolve "
                     f"{_spread(o)}; ratio per repeat {_spread(ratios)}x (median (min-max))")
        for fw in ("qdevolve", "openevolve"):
            for r in (r for r in rows if r["latency_s"] == latency and r["framework"] == fw):
                lines.append(f"  {fw}: {r['iterations']} iterations, {r['evaluated']} children evaluated, "
                             f"{r['successful']} ok" + (f", {r['kept_in_database']} still in its database"
                                                         if "kept_in_database" in r else ""))
    Console().print(t)
    print("\n".join(ln for ln in lines if ln.startswith(("At ", "  "))))
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
        print(f"wrote {args.out}")
    if args.raw:
        from _raw import write_raw

        command = (f"nice -n {os.nice(0)} " if os.nice(0) else "") + " ".join(
            ["python", "benchmarks/bench_llm_loop.py", *sys.argv[1:]])
        settings = {k: getattr(args, k) for k in ("iterations", "concurrency", "workers", "backend", "warm", "repeats",
                                                  "script")}
        path = write_raw(args.raw, {"settings": settings, "rows": rows, "load_during": loads,
                                    "rate": "successful evaluations per second of wall time (evaluator calls that "
                                            "ended ok, from constructing the run to its end)"},
                         command=command, seeds=list(range(args.repeats)), meta=measured)
        print(f"wrote {path}")


if __name__ == "__main__":
    os.environ.setdefault("OPENAI_API_KEY", "scripted")
    main()
