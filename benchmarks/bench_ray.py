"""Ray executor benchmark: controller overhead, throughput scaling, one controller's ceiling.

Usage (a cluster must be running: ``ray start --head --port 6390`` plus workers)::

    .venv/bin/python benchmarks/bench_ray.py --address 127.0.0.1:6390 [--pg URL] [--out FILE]

Measures (issue 14, item 9):

1. **Controller overhead per evaluation**, one slot, a no-op sandbox (a ``--plugin`` file the
   workers load, so it also exercises file shipping): wall time per evaluation through the
   ``ray`` executor vs through the ``local`` executor (one slot, the same sandbox). Goal:
   ray <= 2x local and <= 10 ms.
2. **Throughput scaling** with a real ``local`` sandbox and an evaluator that sleeps 1 s:
   evaluations/s with 1, 2 and 4 Ray worker slots. Goal: >= 3.5x at 4.
3. **One controller's ceiling** (simulated scaling to 64 workers): the controller CPU time
   per evaluation through the ray executor with the no-op sandbox (8 slots kept full) and
   the store's rate of one-evaluation transactions (program + evaluation + event, as the
   engine's ``tell``) on SQLite and PostgreSQL with 8 writer threads. 64 workers whose
   evaluations take ``T`` seconds need ``64 / T`` evaluations/s; the table gives the
   smallest ``T`` each ceiling sustains.
4. **The policy actor** (issue 14, item 6; ``--policy``): the tiny ``expr_edit`` policy
   sampled in the controller (``transformers``) vs through a ``ray_policy`` actor (8
   completions of one prompt, 12 tokens each, per request), and the time for the actor to
   serve a new version (state dict read from the saved version, ``ray.put``, loaded).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import sys
import tempfile
import threading
import time
from pathlib import Path

from qdevolve import registry
from qdevolve.db.store import LineageStore
from qdevolve.evolve.executors import local, ray_executor  # noqa: F401  (register "local" and "ray")
from qdevolve.evolve.executors.base import EvalJob
from qdevolve.sandbox import SandboxLimits
from qdevolve.types import ArchiveEvent, EvalResult, Program

NOOP_PLUGIN = '''\
from qdevolve import registry
from qdevolve.types import EvalResult


@registry.sandbox("bench_noop")
class NoopSandbox:
    """Returns at once: what is left is the executor's own cost."""

    name = "bench_noop"

    def evaluate(self, program, evaluator=None, limits=None, *, cascade_thresholds=None):
        return EvalResult(score=1.0, metrics={"combined_score": 1.0})

    def close(self):
        pass
'''
SLEEP_EVALUATOR = '''\
import time


def evaluate(program_path):
    time.sleep(1.0)
    return {"combined_score": 1.0}
'''


def _jobs(n: int, evaluator: Path, sandbox: dict, plugins: tuple[Path, ...] = ()) -> list[EvalJob]:
    return [EvalJob(Program(code=f"x = {i}\n", run_id="bench"), evaluator, SandboxLimits(wall_s=60),
                    sandbox, plugins) for i in range(n)]


def overhead(address: str, work: Path, n: int) -> list[tuple[str, str, str, str]]:
    plugin = work / "noop_plugin.py"
    plugin.write_text(NOOP_PLUGIN)
    evaluator = work / "evaluator.py"
    evaluator.write_text(SLEEP_EVALUATOR)
    registry.load_plugin_file(plugin)
    jobs = _jobs(n + 20, evaluator, {"type": "bench_noop"}, (plugin,))
    local_ex = registry.executor.create({"type": "local"}, slots=1)  # the engine's real local executor
    try:
        for j in jobs[:20]:  # warm: the slot's sandbox built
            local_ex.submit(j).result()
        t0 = time.perf_counter()
        for j in jobs[20:]:
            local_ex.submit(j).result()
        local_ms = (time.perf_counter() - t0) / n * 1000
    finally:
        local_ex.close()
    ex = registry.executor.create({"type": "ray", "address": address, "workers": 1, "num_cpus": 0.5})
    try:
        for j in jobs[:20]:  # warm: actor placed, files shipped, sandbox built
            ex.submit(j).result(timeout=120)
        t0 = time.perf_counter()
        for j in jobs[20:]:
            ex.submit(j).result(timeout=120)
        ray_ms = (time.perf_counter() - t0) / n * 1000
    finally:
        ex.close()
    return [("controller overhead per evaluation, `local` executor (1 slot), no-op sandbox",
             f"{local_ms:.3f} ms", "-", f"{n} sequential evaluations"),
            ("controller overhead per evaluation, ray (1 actor), no-op sandbox", f"{ray_ms:.2f} ms",
             "<= 2x local, <= 10 ms", f"{ray_ms / max(local_ms, 1e-9):,.0f}x local; {n} sequential evaluations")]


def scaling(address: str, work: Path, per_slot: int) -> list[tuple[str, str, str, str]]:
    evaluator = work / "evaluator.py"
    evaluator.write_text(SLEEP_EVALUATOR)
    rows, base = [], None
    for slots in (1, 2, 4):
        ex = registry.executor.create({"type": "ray", "address": address, "workers": slots, "num_cpus": 0.5})
        try:
            for f in [ex.submit(j) for j in _jobs(slots, evaluator, {"type": "local"})]:
                f.result(timeout=300)  # warm every slot
            jobs = _jobs(slots * per_slot, evaluator, {"type": "local"})
            t0 = time.perf_counter()
            outs = [f.result(timeout=600) for f in [ex.submit(j) for j in jobs]]
            wall = time.perf_counter() - t0
        finally:
            ex.close()
        assert all(o.result.ok for o in outs), [o.result.error for o in outs if not o.result.ok][:2]
        rate = len(jobs) / wall
        base = base or rate
        rows.append((f"throughput, 1 s sleep evaluator, local sandbox, {slots} Ray worker slot(s)",
                     f"{rate:.2f} eval/s", ">= 3.5x at 4" if slots == 4 else "-",
                     f"{rate / base:.2f}x of 1 slot; {len(jobs)} evaluations in {wall:.1f} s; "
                     f"{len({o.worker for o in outs})} workers"))
    return rows


def controller_ceiling(address: str, work: Path, n: int) -> tuple[float, list[tuple[str, str, str, str]]]:
    plugin = work / "noop_plugin.py"
    evaluator = work / "evaluator.py"
    ex = registry.executor.create({"type": "ray", "address": address, "workers": 8, "num_cpus": 0.25})
    try:
        jobs = _jobs(n, evaluator, {"type": "bench_noop"}, (plugin,))
        for f in [ex.submit(j) for j in jobs[:16]]:
            f.result(timeout=120)
        c0, t0 = time.process_time(), time.perf_counter()
        for f in [ex.submit(j) for j in jobs]:
            f.result(timeout=300)
        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    finally:
        ex.close()
    per_eval = cpu / n
    ceiling = 1 / per_eval
    return ceiling, [("one controller: CPU per evaluation through the ray executor (8 slots, no-op)",
                      f"{per_eval * 1000:.2f} ms CPU", "-",
                      f"ceiling {ceiling:,.0f} eval/s of controller CPU; 64 workers busy down to "
                      f"{64 / ceiling:.2f} s per evaluation; measured {n / wall:,.0f} eval/s wall on this cluster")]


def store_ceiling(target: str, label: str, n: int, threads: int = 8) -> list[tuple[str, str, str, str]]:
    st = LineageStore(target, create=True)
    rid = st.create_run(name="ceiling")
    progs = [Program(code=f"x = {i}\n", run_id=rid) for i in range(n)]
    st.write(programs=[progs[0]])
    lock = threading.Lock()
    it = iter(progs[1:])

    def worker() -> None:
        while True:
            with lock:
                p = next(it, None)
            if p is None:
                return
            r = EvalResult(score=1.0, metrics={"combined_score": 1.0}, features={"f": 0.5})
            st.write(run_id=rid, programs=[Program(code=p.code, run_id=rid, id=p.id, parent_ids=(progs[0].id,))],
                     evaluations=[(p.id, r)], events=[ArchiveEvent(program_id=p.id, kind="new",
                                                                   archive="map_elites", cell="0,0", score=1.0)])

    t0 = time.perf_counter()
    ts = [threading.Thread(target=worker) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    wall = time.perf_counter() - t0
    st.close()
    rate = (n - 1) / wall
    return [(f"one {label} database: one-evaluation transactions ({threads} writer threads)",
             f"{rate:,.0f} eval/s", "-", f"64 workers busy down to {64 / rate:.3f} s per evaluation; "
             f"{n - 1} transactions in {wall:.1f} s")]


def policy_actor(address: str, work: Path, n: int) -> list[tuple[str, str, str, str]]:
    """Generation in-process vs through the policy actor; seconds to push a new version."""
    import asyncio
    import uuid

    import ray
    import torch

    from qdevolve.backends.base import GenerationRequest
    from qdevolve.backends.ray_policy import RayPolicyBackend, stop_policy_actor
    from qdevolve.backends.transformers_backend import TransformersBackend
    from qdevolve.rl.tiny import load_tiny_policy

    torch.set_num_threads(1)  # as in the actor (Ray sets OMP_NUM_THREADS=1): one core each, a fair comparison
    model, tok = load_tiny_policy("expr_edit")
    model.save_pretrained(work / "v0")
    tok.save_pretrained(work / "v0")
    req = [GenerationRequest(prompt="0>1,1>4,2>7,3>10,5>16|x+1|01000:", n=8, temperature=1.0, max_tokens=12)]

    def per_request(backend: object) -> float:
        asyncio.run(backend.generate(req))  # warm-up
        t0 = time.perf_counter()
        for _ in range(n):
            asyncio.run(backend.generate(req))
        return (time.perf_counter() - t0) / n

    local_s = per_request(TransformersBackend(model, tok))
    if not ray.is_initialized():
        ray.init(address=address, log_to_driver=False)
    name = f"bench-policy-{uuid.uuid4().hex[:8]}"
    try:
        remote = RayPolicyBackend(actor=name, model=str(work / "v0"), version=0, num_cpus=0)
        ray_s = per_request(remote)
        pushes = []
        for v in range(1, 6):
            t0 = time.perf_counter()
            remote.load_policy(v, str(work / "v0"))
            pushes.append(time.perf_counter() - t0)
    finally:
        stop_policy_actor(name)
    n_params = sum(p.numel() for p in model.parameters())
    return [
        ("generation, tiny policy in the controller (`transformers`), 8 completions x 12 tokens",
         f"{local_s * 1e3:.1f} ms/request", "-", f"{n} requests"),
        ("generation through the `ray_policy` actor, same requests", f"{ray_s * 1e3:.1f} ms/request", "-",
         f"{ray_s / local_s:.2f}x in-process (actor round trip + pickled completions)"),
        ("new version served by the actor (read state dict, `ray.put`, load)",
         f"{sorted(pushes)[len(pushes) // 2] * 1e3:.1f} ms", "-", f"median of 5; {n_params:,} parameters"),
    ]


def table(rows: list[tuple[str, str, str, str]]) -> str:
    lines = ["| measurement | result | goal | notes |", "|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--address", default=os.environ.get("QDEVOLVE_TEST_RAY_ADDRESS", "auto"))
    ap.add_argument("--n", type=int, default=300, help="evaluations for the overhead figures")
    ap.add_argument("--per-slot", type=int, default=4, help="1 s evaluations per slot in the scaling runs")
    ap.add_argument("--store-n", type=int, default=2000, help="transactions for the store ceiling")
    ap.add_argument("--pg", default=os.environ.get("QDEVOLVE_BENCH_PG_URL"),
                    help="also measure this PostgreSQL URL (its qdevolve tables are dropped!)")
    ap.add_argument("--out", type=Path, default=None, help="append a markdown section here")
    ap.add_argument("--only-overhead", action="store_true", help="only the controller-overhead figures")
    ap.add_argument("--policy", action="store_true", help="only the policy-actor figures (needs the 'rl' extra)")
    args = ap.parse_args()
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="qdevolve-bench-ray-") as d:
        work = Path(d)
        if args.policy:
            rows = policy_actor(args.address, work, max(10, args.n // 10))
            args.only_overhead = True  # nothing else this time
        else:
            rows = overhead(args.address, work, args.n)
        print(table(rows), flush=True)
        if not args.only_overhead:
            rows += scaling(args.address, work, args.per_slot)
            print(table(rows[-3:]), flush=True)
            _, ceiling_rows = controller_ceiling(args.address, work, args.n)
            rows += ceiling_rows
            rows += store_ceiling(str(work / "ceiling.sqlite"), "SQLite", args.store_n)
            print(table(rows[-2:]), flush=True)
    if args.pg and not args.only_overhead:
        from sqlalchemy import create_engine

        from qdevolve.db import schema as S

        eng = create_engine(args.pg)
        S.metadata.drop_all(eng)
        eng.dispose()
        rows += store_ceiling(args.pg, "PostgreSQL", args.store_n)
    text = table(rows)
    print(text)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"load average before {', '.join(f'{x:.1f}' for x in load0)}, after {load}")
    if args.out:
        argv = [a.replace(args.pg, "URL") if args.pg else a for a in sys.argv[1:]]
        machine = f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
        with args.out.open("a") as fh:
            fh.write(f"\n## {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC\n\n{text}\n\n"
                     f"- command: `python benchmarks/bench_ray.py {' '.join(argv)}`\n"
                     f"- machine: {machine}; load average before {', '.join(f'{x:.1f}' for x in load0)}, "
                     f"after {load} (shared machine)\n")


if __name__ == "__main__":
    main()
