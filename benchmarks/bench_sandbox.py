"""Per-evaluation overhead of each sandbox backend on a trivial program and evaluator.

Measured in one run: p50/p95 latency of one evaluation, one at a time, for

* ``in-process``: the OpenEvolve-style baseline (write the program to a temp file, call the
  already-imported evaluator in the controller; no isolation at all);
* ``local``, ``bwrap`` (cold: a new sandbox and two interpreters per evaluation),
  ``local warm`` and ``bwrap warm`` (a pre-imported template per worker forks a fresh
  isolated runner/candidate pair per evaluation), ``docker fresh`` (a container per
  evaluation) and ``docker warm`` (one container per worker);

and evaluations/s with 2 worker threads. Since issue 10 every backend runs the candidate in a
process of its own behind the evaluator (the trivial evaluator below makes one call into it).
Goals: ``local``/``bwrap`` cold p50 <= 150 ms (issue 3 said 80/120 ms before the second
process), ``local warm`` and ``bwrap warm`` p50 <= 25 ms, ``docker warm`` p50 <= 150 ms. Writes
``benchmarks/results/sandbox.md``.

    python benchmarks/bench_sandbox.py [--n 60] [--n-docker-fresh 20] [--throughput 60]
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import os
import platform
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from qdevolve import registry  # noqa: E402
from qdevolve.sandbox import SandboxLimits  # noqa: E402
from qdevolve.types import Program  # noqa: E402

PROGRAM = "def solve(n):\n    return n * (n - 1) // 2\n"
EVALUATOR = """
import importlib.util

def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("candidate", program_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return {"combined_score": float(mod.solve(10) == 45)}
"""
GOALS = {"local": 150.0, "bwrap": 150.0, "local warm": 25.0, "bwrap warm": 25.0, "docker warm": 150.0}


class InProcess:
    """The OpenEvolve-style baseline: the evaluator runs inside the controller."""

    def __init__(self, evaluator: Path) -> None:
        spec = importlib.util.spec_from_file_location("bench_evaluator", evaluator)
        self.module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(self.module)

    def evaluate(self, program: Program, evaluator=None, limits=None):
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
            fh.write(program.code)
        try:
            out = self.module.evaluate(fh.name)
        finally:
            os.unlink(fh.name)
        assert out["combined_score"] == 1.0
        return out

    def close(self) -> None:
        pass


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def measure(box, evaluator: Path, n: int, throughput_n: int, limits: SandboxLimits) -> dict:
    prog = Program(code=PROGRAM)
    for _ in range(3):  # warm-up (staging copies, warm containers, page cache)
        box.evaluate(prog, evaluator, limits)
    lat = []
    for _ in range(n):
        t = time.perf_counter()
        r = box.evaluate(prog, evaluator, limits)
        lat.append((time.perf_counter() - t) * 1000)
        if not isinstance(r, dict):
            assert r.status == "ok" and r.score == 1.0, (r.status, r.error)
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda _: box.evaluate(prog, evaluator, limits), range(4)))  # warm both workers
        t = time.perf_counter()
        results = list(pool.map(lambda _: box.evaluate(prog, evaluator, limits), range(throughput_n)))
        rate = throughput_n / (time.perf_counter() - t)
    for r in results:
        if not isinstance(r, dict):
            assert r.status == "ok", r.error
    return {"p50": statistics.median(lat), "p95": pct(lat, 0.95), "rate": rate, "n": n}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=60, help="sequential evaluations per backend")
    ap.add_argument("--n-docker-fresh", type=int, default=20)
    ap.add_argument("--throughput", type=int, default=60, help="evaluations for the 2-worker rate")
    ap.add_argument("--backends", default="in-process,local,local warm,bwrap,bwrap warm,docker fresh,docker warm")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "sandbox.md")
    args = ap.parse_args()

    limits = SandboxLimits(wall_s=30, cpu_s=10, memory_mb=1024)
    load0 = os.getloadavg()[0]
    tmp = Path(tempfile.mkdtemp(prefix="qdevolve-bench-"))
    evaluator = tmp / "evaluator.py"
    evaluator.write_text(EVALUATOR)
    rows = []
    for name in [b.strip() for b in args.backends.split(",") if b.strip()]:
        n, thr = args.n, args.throughput
        try:
            if name == "in-process":
                box = InProcess(evaluator)
            elif name.startswith("docker"):
                box = registry.sandbox.create({"type": "docker", "warm": name == "docker warm"})
                if name == "docker fresh":
                    n, thr = args.n_docker_fresh, max(10, args.n_docker_fresh)
            elif name in ("local warm", "bwrap warm"):
                box = registry.sandbox.create({"type": name.split()[0], "warm": True})
                if not box.warm:
                    raise RuntimeError(f"{name.split()[0]} has no warm path here")
            else:
                box = registry.sandbox.create({"type": name})
        except Exception as exc:  # noqa: BLE001 - report and continue with the others
            print(f"{name:13} unavailable: {exc}", flush=True)
            rows.append((name, None, str(exc)))
            continue
        try:
            res = measure(box, evaluator, n, thr, limits)
        finally:
            box.close()
        goal = GOALS.get(name)
        verdict = "" if goal is None else ("met" if res["p50"] <= goal else "MISSED")
        print(f"{name:13} p50 {res['p50']:7.1f} ms  p95 {res['p95']:7.1f} ms  2 workers {res['rate']:6.1f} evals/s"
              f"  {'' if goal is None else f'(goal p50 <= {goal:.0f} ms: {verdict})'}", flush=True)
        rows.append((name, res, verdict))

    lines = [
        "# Sandbox overhead (benchmarks/bench_sandbox.py)",
        "",
        f"Date: {dt.datetime.now(dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}. Machine: "
        f"{platform.platform()}, {os.cpu_count()} CPU cores (shared with other jobs), Python "
        f"{platform.python_version()}, running as {'root' if os.geteuid() == 0 else 'a user'}; "
        f"1-minute load average {load0:.1f} at the start and {os.getloadavg()[0]:.1f} at the end "
        "(other jobs share the cores, so the latencies include their contention).",
        "",
        f"Command: `python benchmarks/bench_sandbox.py --n {args.n} --n-docker-fresh {args.n_docker_fresh}"
        f" --throughput {args.throughput}`" + (f" (1-minute load average {load0:.1f})" if load0 else ""),
        "",
        "Trivial program (a one-line function) and evaluator (imports the program, checks one "
        "value). Latency: one evaluation at a time after 3 warm-up runs. Rate: 2 worker threads.",
        "",
        "| backend | n | p50 ms | p95 ms | evals/s (2 workers) | goal (p50) |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for name, res, verdict in rows:
        if res is None:
            lines.append(f"| {name} | - | - | - | - | unavailable: {verdict} |")
            continue
        goal = GOALS.get(name)
        goal_s = "-" if goal is None else f"<= {goal:.0f} ms: {verdict}"
        lines.append(f"| {name} | {res['n']} | {res['p50']:.1f} | {res['p95']:.1f} | {res['rate']:.1f} | {goal_s} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")
    import shutil

    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
