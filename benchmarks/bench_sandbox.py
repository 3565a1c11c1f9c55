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


def _tree_cpu_s(pid: int) -> float:
    """CPU seconds of ``pid`` and of its descendants, live or reaped (utime, stime, cutime,
    cstime of each live process in the tree)."""
    tick = os.sysconf("SC_CLK_TCK")
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += sum(int(x) for x in fields[11:15]) / tick
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return total


def cpu_probe(box):
    """A function returning the CPU seconds spent so far on ``box``'s evaluations: the
    controller's own, its reaped children's (cold paths) and the live warm templates' trees.
    Unlike latency it hardly depends on the machine's load (``None``: docker, whose work is
    in the container runtime)."""
    import resource

    if box.__class__.__name__ == "DockerSandbox":
        return None

    def probe() -> float:
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        warm = sum(_tree_cpu_s(z.proc.pid) for z in getattr(box, "_zygotes", {}).values())
        return time.process_time() + ru.ru_utime + ru.ru_stime + warm
    return probe


def measure(box, evaluator: Path, n: int, throughput_n: int, limits: SandboxLimits) -> dict:
    prog = Program(code=PROGRAM)
    for _ in range(3):  # warm-up (staging copies, warm containers, page cache)
        box.evaluate(prog, evaluator, limits)
    probe = cpu_probe(box)
    cpu0 = probe() if probe else None
    lat = []
    for _ in range(n):
        t = time.perf_counter()
        r = box.evaluate(prog, evaluator, limits)
        lat.append((time.perf_counter() - t) * 1000)
        if not isinstance(r, dict):
            assert r.status == "ok" and r.score == 1.0, (r.status, r.error)
    cpu_ms = None if probe is None else (probe() - cpu0) * 1000 / n
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda _: box.evaluate(prog, evaluator, limits), range(4)))  # warm both workers
        t = time.perf_counter()
        results = list(pool.map(lambda _: box.evaluate(prog, evaluator, limits), range(throughput_n)))
        rate = throughput_n / (time.perf_counter() - t)
    for r in results:
        if not isinstance(r, dict):
            assert r.status == "ok", r.error
    return {"p50": statistics.median(lat), "p95": pct(lat, 0.95), "rate": rate, "n": n, "cpu_ms": cpu_ms}


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
        cpu = "    -" if res["cpu_ms"] is None else f"{res['cpu_ms']:5.1f}"
        print(f"{name:13} p50 {res['p50']:7.1f} ms  p95 {res['p95']:7.1f} ms  CPU {cpu} ms/eval"
              f"  2 workers {res['rate']:6.1f} evals/s"
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
        "value). Latency: one evaluation at a time after 3 warm-up runs. CPU: CPU time of every "
        "process involved (controller, runners, candidates, warm templates) per evaluation, "
        "which load barely changes. Rate: 2 worker threads.",
        "",
        "| backend | n | p50 ms | p95 ms | CPU ms/eval | evals/s (2 workers) | goal (p50) |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for name, res, verdict in rows:
        if res is None:
            lines.append(f"| {name} | - | - | - | - | - | unavailable: {verdict} |")
            continue
        goal = GOALS.get(name)
        goal_s = "-" if goal is None else f"<= {goal:.0f} ms: {verdict}"
        cpu = "-" if res["cpu_ms"] is None else f"{res['cpu_ms']:.1f}"
        lines.append(f"| {name} | {res['n']} | {res['p50']:.1f} | {res['p95']:.1f} | {cpu} | {res['rate']:.1f} | {goal_s} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")
    import shutil

    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
