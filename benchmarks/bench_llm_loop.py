"""qdevolve against OpenEvolve on the same example and the same local scripted model server.

Both frameworks evolve ``examples/circle_packing`` with SEARCH/REPLACE diffs from the same
scripted OpenAI-compatible server (``qdevolve.testing.scripted_server``, a real HTTP server
on 127.0.0.1) at equal model concurrency: ``--concurrency C`` model requests in flight for
both (qdevolve: ``backend.concurrency = run.max_pending = C``, with ``--workers`` sandbox
workers; OpenEvolve: ``evaluator.parallel_evaluations = C`` worker processes, each waiting
for its reply and then evaluating), at two server latencies: 0 s and 1 s per reply.
Reported per framework: iterations/s, successful evaluations/s (children whose evaluation
ended ``ok``), children salvaged (qdevolve: ``metadata.salvaged``) and controller CPU per
evaluation (the controller process only; sandbox processes and OpenEvolve's worker
processes excluded alike). qdevolve runs with its sandbox on (bwrap where available);
OpenEvolve evaluates in-process in its worker processes (no isolation). Each framework
runs in its own process.

    python benchmarks/bench_llm_loop.py [--iterations 40] [--concurrency 8] [--workers 2] [--script sloppy:0.4]

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


def run_qdevolve(url: str, iterations: int, workdir: Path, concurrency: int, workers: int) -> dict:
    from qdevolve.db import LineageStore
    from qdevolve.evolve.engine import Evolution
    from qdevolve.evolve.example import load_example

    ex = load_example(EXAMPLE)
    cfg = ex.config.with_overrides(
        iterations=iterations, workers=workers, max_pending=concurrency, seed=0,
        mutation=[{"type": "diff", "weight": 1.0}],
        backend={"type": "openai", "api_base": url, "model": "scripted", "timeout_s": 60, "retries": 2,
                 "concurrency": concurrency})
    store = LineageStore(workdir / "qd.sqlite")
    evo = Evolution.start(ex, cfg, store, progress=False)
    c0, t0 = _cpu(), time.perf_counter()
    evo.run()
    wall, cpu = time.perf_counter() - t0, _cpu() - c0
    evo.close()
    ok = store.execute("SELECT COUNT(*) FROM evaluations e JOIN programs p ON p.id = e.program_id "
                       "WHERE p.operator != 'seed' AND e.status = 'ok'")[0][0]
    salvaged = store.execute("SELECT COUNT(*) FROM programs WHERE json_extract(metadata, '$.salvaged') "
                             "IS NOT NULL")[0][0]
    return {"framework": "qdevolve", "sandbox": evo.sandbox_name, "iterations": evo.children,
            "successful": ok, "salvaged": salvaged, "wall_s": wall, "cpu_s": cpu,
            "model_concurrency": concurrency, "eval_workers": workers}


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


def run_openevolve(url: str, iterations: int, workdir: Path, concurrency: int, workers: int) -> dict:
    from openevolve import OpenEvolve
    from openevolve.config import load_config

    cfg_path = workdir / "oe_config.yaml"
    cfg_path.write_text(OE_CONFIG.format(n=iterations, url=url, concurrency=concurrency))
    controller = OpenEvolve(str(EXAMPLE / "initial_program.py"), str(EXAMPLE / "evaluator.py"),
                            load_config(str(cfg_path)), output_dir=str(workdir / "oe_out"))
    c0, t0 = _cpu(), time.perf_counter()
    asyncio.run(controller.run(iterations=iterations))
    wall, cpu = time.perf_counter() - t0, _cpu() - c0
    programs = list(controller.database.programs.values())
    children = [p for p in programs if p.parent_id is not None]
    ok = sum(1 for p in children if "error" not in (p.metrics or {}))
    return {"framework": "openevolve", "sandbox": "none (in-process)", "iterations": iterations,
            "successful": ok, "salvaged": 0, "wall_s": wall, "cpu_s": cpu,
            "model_concurrency": concurrency, "eval_workers": concurrency}


def _child(framework: str, url: str, iterations: int, concurrency: int, workers: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", framework, "--url", url, "--iterations",
                          str(iterations), "--concurrency", str(concurrency), "--workers", str(workers)],
                         capture_output=True, text=True, timeout=1800)
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    if out.returncode != 0 or not line:
        raise RuntimeError(f"{framework} failed:\n{out.stderr[-3000:]}")
    return json.loads(line[-1][len("RESULT "):])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iterations", type=int, default=40)
    ap.add_argument("--latencies", default="0,1")
    ap.add_argument("--concurrency", type=int, default=8, help="model requests in flight, both frameworks")
    ap.add_argument("--workers", type=int, default=2, help="qdevolve sandbox workers")
    ap.add_argument("--script", default="evolve",
                    help="scripted model: evolve (clean diffs) or sloppy[:fraction] (some diffs slip as real models' do)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "llm_loop.md"))
    ap.add_argument("--child", choices=["qdevolve", "openevolve"])
    ap.add_argument("--url")
    args = ap.parse_args()
    if args.child:
        with tempfile.TemporaryDirectory() as d:
            fn = run_qdevolve if args.child == "qdevolve" else run_openevolve
            result = fn(args.url, args.iterations, Path(d), args.concurrency, args.workers)
            print("RESULT " + json.dumps(result), flush=True)
        return
    from rich.console import Console
    from rich.table import Table

    rows = []
    for latency in [float(x) for x in args.latencies.split(",")]:
        server = subprocess.Popen([sys.executable, "-m", "qdevolve.testing.scripted_server", "--script", args.script,
                                   "--latency", str(latency)], stdout=subprocess.PIPE, text=True)
        try:
            url = server.stdout.readline().split()[1]
            for fw in ("qdevolve", "openevolve"):
                r = _child(fw, url, args.iterations, args.concurrency, args.workers)
                r["latency_s"] = latency
                rows.append(r)
        finally:
            server.terminate()
            server.wait(timeout=10)
    load = os.getloadavg()[0]
    t = Table(title=f"{args.iterations} iterations on circle_packing, model concurrency {args.concurrency}")
    cols = ("latency", "framework", "isolation", "model concurrency", "eval workers", "iterations/s",
            "successful evals/s", "ok / salvaged", "controller CPU ms/eval")
    for c in cols:
        t.add_column(c)
    lines = [f"# bench_llm_loop ({time.strftime('%Y-%m-%d')})", "",
             f"Command: `python benchmarks/bench_llm_loop.py --iterations {args.iterations} --concurrency "
             f"{args.concurrency} --workers {args.workers} --script {args.script}` ({os.cpu_count()} cores, load average "
             f"{load:.1f} at the end, scripted server on 127.0.0.1).", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        vals = (f"{r['latency_s']:.0f} s", r["framework"], r["sandbox"], str(r["model_concurrency"]),
                str(r["eval_workers"]), f"{r['iterations'] / r['wall_s']:.2f}", f"{r['successful'] / r['wall_s']:.2f}",
                f"{r['successful']}/{r['iterations']} / {r['salvaged']}",
                f"{1000 * r['cpu_s'] / max(r['iterations'], 1):.1f}")
        t.add_row(*vals)
        lines.append("| " + " | ".join(vals) + " |")
    for latency in sorted({r["latency_s"] for r in rows}):
        q = next(r for r in rows if r["latency_s"] == latency and r["framework"] == "qdevolve")
        o = next(r for r in rows if r["latency_s"] == latency and r["framework"] == "openevolve")
        ratio = (q["successful"] / q["wall_s"]) / max(o["successful"] / o["wall_s"], 1e-9)
        lines.append(f"\nAt {latency:.0f} s latency: qdevolve / OpenEvolve successful evaluations/s = {ratio:.2f}x")
    Console().print(t)
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines[-2:]))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    os.environ.setdefault("OPENAI_API_KEY", "scripted")
    main()
