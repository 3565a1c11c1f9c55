"""Ray executor benchmark: controller overhead, throughput scaling, one controller's ceiling.

Usage (a cluster must be running: ``ray start --head --port 6390`` plus workers)::

    .venv/bin/python benchmarks/bench_ray.py --address 127.0.0.1:6390 [--repeats 5] [--policy] [--pg URL]

Writes the raw file ``benchmarks/results/ray.json`` (``--raw NAME`` for another), rewritten after
every repeat; its tables are rendered by ``benchmarks/reports/ray_bench.py``. Every measurement is
taken ``--repeats`` times, the kinds interleaved (one round of everything per repeat), and the
raw file keeps each repeat's numbers (the overhead rows every evaluation's latency):

1. **Controller overhead per evaluation** (``overhead``), one slot, a no-op sandbox (a
   ``--plugin`` file the workers load, so it also exercises file shipping): wall time of each
   of ``--n`` sequential evaluations through the ``ray`` executor and through the engine's
   ``local`` executor (one slot, the same sandbox), after 20 warm-up evaluations each. Goals
   (issue 14): ray <= 2x local and <= 10 ms per evaluation.
2. **Throughput scaling** (``throughput``) with a real ``local`` sandbox and an evaluator that
   sleeps 1 s: evaluations/s with 1, 2 and 4 Ray worker slots (``--per-slot`` evaluations per
   slot, after one warm-up evaluation per slot). Goal: >= 3.5x the 1-slot rate at 4 slots.
3. **One controller's ceiling** (simulated scaling to 64 workers): the controller's CPU time per
   evaluation through the ray executor with the no-op sandbox and 8 slots kept full
   (``controller_cpu``), and the store's rate of one-evaluation transactions (program +
   evaluation + archive event, as the engine's ``tell``) with 8 writer threads (``store_tx``) on
   SQLite and, with ``--pg`` / ``QDEVOLVE_BENCH_PG_URL``, PostgreSQL (its qdevolve tables are
   dropped). 64 workers whose evaluations take ``T`` seconds need ``64 / T`` evaluations/s.
4. **The policy actor** (issue 14, item 6; ``--policy``, needs the ``rl`` extra): the tiny
   ``expr_edit`` policy sampled in the controller (``transformers``, 1 torch thread) vs through a
   ``ray_policy`` actor (8 completions of one prompt, 12 tokens each, per request), and the time
   for the actor to serve a new version (state dict read from the saved version, ``ray.put``,
   loaded; 5 pushes per repeat).

What is not measured (no PostgreSQL URL, no ``--policy``, a failure) is recorded with its reason
under ``not_measured``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from _raw import start_meta, write_raw  # noqa: E402

from qdevolve import registry  # noqa: E402
from qdevolve.db.store import LineageStore  # noqa: E402
from qdevolve.evolve.executors import local, ray_executor  # noqa: E402, F401  (register "local" and "ray")
from qdevolve.evolve.executors.base import EvalJob  # noqa: E402
from qdevolve.sandbox import SandboxLimits  # noqa: E402
from qdevolve.types import ArchiveEvent, EvalResult, Program  # noqa: E402

WARM = 20  # warm-up evaluations before the overhead clock starts
SLOTS = (1, 2, 4)
CEILING_SLOTS = 8
WRITER_THREADS = 8
PUSHES = 5
SLEEP_S = 1.0

# The goals of issue 14 (item 9), judged by benchmarks/reports/ray_bench.py on the repeats' numbers.
GOALS: dict[str, dict[str, Any]] = {
    "overhead_ms": {"metric": "ray_ms_per_eval", "op": "<=", "value": 10, "unit": "ms"},
    "overhead_ratio": {"metric": "ray_over_local", "op": "<=", "value": 2, "unit": "x"},
    "speedup": {"metric": "speedup_over_1_slot", "op": ">=", "value": 3.5, "unit": "x", "applies_to": {"slots": 4}},
}

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
SLEEP_EVALUATOR = f'''\
import time


def evaluate(program_path):
    time.sleep({SLEEP_S})
    return {{"combined_score": 1.0}}
'''


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _jobs(n: int, evaluator: Path, sandbox: dict, plugins: tuple[Path, ...] = ()) -> list[EvalJob]:
    return [EvalJob(Program(code=f"x = {i}\n", run_id="bench"), evaluator, SandboxLimits(wall_s=60),
                    sandbox, plugins) for i in range(n)]


def _files(work: Path) -> tuple[Path, Path]:
    plugin, evaluator = work / "noop_plugin.py", work / "evaluator.py"
    if not plugin.exists():
        plugin.write_text(NOOP_PLUGIN)
        evaluator.write_text(SLEEP_EVALUATOR)
        registry.load_plugin_file(plugin)
    return plugin, evaluator


def _sequential(ex: Any, jobs: list[EvalJob]) -> tuple[list[float], float]:
    """Per-evaluation wall milliseconds of ``jobs`` run one after another, and the total wall seconds."""
    for j in jobs[:WARM]:  # warm: the slot's sandbox built (for ray: actor placed, files shipped)
        ex.submit(j).result(timeout=120)
    lat = []
    t0 = time.perf_counter()
    for j in jobs[WARM:]:
        t = time.perf_counter()
        ex.submit(j).result(timeout=120)
        lat.append(round((time.perf_counter() - t) * 1000, 5))
    return lat, time.perf_counter() - t0


def overhead(address: str, work: Path, n: int, repeat: int) -> list[dict[str, Any]]:
    """One repeat of the sequential no-op evaluations: the ``local`` executor, then ``ray``."""
    plugin, evaluator = _files(work)
    jobs = _jobs(n + WARM, evaluator, {"type": "bench_noop"}, (plugin,))
    rows = []
    for name in ("local", "ray"):
        spec = ({"type": "local"} if name == "local"
                else {"type": "ray", "address": address, "workers": 1, "num_cpus": 0.5})
        ex = registry.executor.create(spec, slots=1)
        try:
            load = _load()
            lat, wall = _sequential(ex, jobs)
        finally:
            ex.close()
        rows.append({"kind": "overhead", "executor": name, "repeat": repeat, "slots": 1, "sandbox": "bench_noop",
                     "n": n, "warm": WARM, "latency_ms": lat, "wall_s": wall, "loadavg": load})
    return rows


def scaling(address: str, work: Path, per_slot: int, repeat: int) -> list[dict[str, Any]]:
    """One repeat of the 1 s evaluations through 1, 2 and 4 Ray worker slots (real local sandbox)."""
    _, evaluator = _files(work)
    rows = []
    for slots in SLOTS:
        ex = registry.executor.create({"type": "ray", "address": address, "workers": slots, "num_cpus": 0.5})
        try:
            for f in [ex.submit(j) for j in _jobs(slots, evaluator, {"type": "local"})]:
                f.result(timeout=300)  # warm every slot
            jobs = _jobs(slots * per_slot, evaluator, {"type": "local"})
            load = _load()
            t0 = time.perf_counter()
            outs = [f.result(timeout=600) for f in [ex.submit(j) for j in jobs]]
            wall = time.perf_counter() - t0
        finally:
            ex.close()
        failed = [o.result.error for o in outs if not o.result.ok]
        rows.append({"kind": "throughput", "repeat": repeat, "slots": slots, "sleep_s": SLEEP_S,
                     "evaluations": len(jobs), "wall_s": wall, "failed": len(failed),
                     "first_error": (str(failed[0])[:300] if failed else None),
                     "workers": len({o.worker for o in outs}), "loadavg": load})
    return rows


def controller_cpu(address: str, work: Path, n: int, repeat: int) -> dict[str, Any]:
    """The controller's CPU seconds for ``n`` no-op evaluations with 8 Ray slots kept full."""
    plugin, evaluator = _files(work)
    ex = registry.executor.create({"type": "ray", "address": address, "workers": CEILING_SLOTS, "num_cpus": 0.25})
    try:
        jobs = _jobs(n, evaluator, {"type": "bench_noop"}, (plugin,))
        for f in [ex.submit(j) for j in jobs[:2 * CEILING_SLOTS]]:
            f.result(timeout=120)
        load = _load()
        c0, t0 = time.process_time(), time.perf_counter()
        for f in [ex.submit(j) for j in jobs]:
            f.result(timeout=300)
        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    finally:
        ex.close()
    return {"kind": "controller_cpu", "repeat": repeat, "slots": CEILING_SLOTS, "sandbox": "bench_noop", "n": n,
            "cpu_s": cpu, "wall_s": wall, "loadavg": load}


def _drop_pg(url: str) -> None:
    from sqlalchemy import create_engine

    from qdevolve.db import schema as S

    eng = create_engine(url)
    S.metadata.drop_all(eng)
    eng.dispose()


def store_tx(target: str, backend: str, n: int, repeat: int, threads: int = WRITER_THREADS) -> dict[str, Any]:
    """``n - 1`` one-evaluation transactions (program + evaluation + archive event) from ``threads`` threads."""
    if backend == "postgresql":
        _drop_pg(target)
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

    load = _load()
    t0 = time.perf_counter()
    ts = [threading.Thread(target=worker) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    wall = time.perf_counter() - t0
    st.close()
    if backend == "postgresql":
        _drop_pg(target)
    return {"kind": "store_tx", "repeat": repeat, "backend": backend, "threads": threads, "transactions": n - 1,
            "wall_s": wall, "loadavg": load}


class PolicyBench:
    """The tiny policy in the controller and through a ``ray_policy`` actor (one actor per repeat)."""

    def __init__(self, work: Path) -> None:
        import torch

        from qdevolve.backends.base import GenerationRequest
        from qdevolve.rl.tiny import load_tiny_policy

        torch.set_num_threads(1)  # as in the actor (Ray sets OMP_NUM_THREADS=1): one core each
        self.model, self.tok = load_tiny_policy("expr_edit")
        self.dir = work / "v0"
        self.model.save_pretrained(self.dir)
        self.tok.save_pretrained(self.dir)
        self.parameters = sum(p.numel() for p in self.model.parameters())
        self.req = [GenerationRequest(prompt="0>1,1>4,2>7,3>10,5>16|x+1|01000:", n=8, temperature=1.0,
                                      max_tokens=12)]

    def _per_request(self, backend: Any, n: int) -> list[float]:
        import asyncio

        asyncio.run(backend.generate(self.req))  # warm-up
        out = []
        for _ in range(n):
            t = time.perf_counter()
            asyncio.run(backend.generate(self.req))
            out.append(round((time.perf_counter() - t) * 1000, 4))
        return out

    def run(self, address: str, n: int, repeat: int) -> list[dict[str, Any]]:
        import uuid

        import ray

        from qdevolve.backends.ray_policy import RayPolicyBackend, stop_policy_actor
        from qdevolve.backends.transformers_backend import TransformersBackend

        load = _load()
        local_ms = self._per_request(TransformersBackend(self.model, self.tok), n)
        owns = not ray.is_initialized()
        if owns:
            ray.init(address=address, log_to_driver=False)
        name = f"bench-policy-{uuid.uuid4().hex[:8]}"
        try:
            remote = RayPolicyBackend(actor=name, model=str(self.dir), version=0, num_cpus=0)
            actor_ms = self._per_request(remote, n)
            pushes = []
            for v in range(1, PUSHES + 1):
                t0 = time.perf_counter()
                remote.load_policy(v, str(self.dir))
                pushes.append(round((time.perf_counter() - t0) * 1000, 4))
        finally:
            stop_policy_actor(name)
            if owns:
                ray.shutdown()  # the executors of the next repeat connect as the engine does
        common = {"repeat": repeat, "completions": 8, "max_tokens": 12, "loadavg": load}
        return [{"kind": "policy_generation", "where": "controller", "request_ms": local_ms, **common},
                {"kind": "policy_generation", "where": "actor", "request_ms": actor_ms, **common},
                {"kind": "policy_push", "push_ms": pushes, "parameters": self.parameters, **common}]


def cluster_facts(address: str) -> dict[str, Any]:
    """Ray's version and the cluster's live nodes and resources (connect, read, disconnect)."""
    import ray

    ray.init(address=address, log_to_driver=False, logging_level="ERROR")
    try:
        nodes = [nd for nd in ray.nodes() if nd.get("Alive")]
        total = ray.cluster_resources()
    finally:
        ray.shutdown()
    return {"ray": ray.__version__, "nodes": len(nodes), "cpus": total.get("CPU"),
            "node_cpus": sorted(nd.get("Resources", {}).get("CPU", 0) for nd in nodes)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--address", default=os.environ.get("QDEVOLVE_TEST_RAY_ADDRESS", "auto"))
    ap.add_argument("--repeats", type=int, default=5, help="times every measurement is taken")
    ap.add_argument("--n", type=int, default=200, help="evaluations for the overhead and controller-CPU figures")
    ap.add_argument("--per-slot", type=int, default=4, help="1 s evaluations per slot in the scaling runs")
    ap.add_argument("--store-n", type=int, default=1000, help="transactions for the store ceiling")
    ap.add_argument("--policy-n", type=int, default=30, help="generation requests per repeat (--policy)")
    ap.add_argument("--pg", default=os.environ.get("QDEVOLVE_BENCH_PG_URL"),
                    help="also measure this PostgreSQL URL (its qdevolve tables are dropped!)")
    ap.add_argument("--policy", action="store_true", help="also the policy-actor figures (needs the 'rl' extra)")
    ap.add_argument("--only-overhead", action="store_true", help="only the controller-overhead figures")
    ap.add_argument("--raw", default="ray", help="raw file name under benchmarks/results/")
    ap.add_argument("--out", default=None, help=argparse.SUPPRESS)  # the markdown report is gone
    args = ap.parse_args()
    if args.out is not None:
        ap.error("--out: markdown is no longer written; the raw file is benchmarks/results/<--raw>.json and "
                 "benchmarks/report.py renders its tables")
    if args.repeats < 1:
        ap.error("--repeats must be >= 1")
    meta = start_meta()
    argv = [a.replace(args.pg, "URL") if args.pg else a for a in sys.argv[1:]]  # no credentials in the raw file
    command = " ".join([Path(sys.executable).name, "benchmarks/bench_ray.py", *argv])
    meta["cluster"] = cluster_facts(args.address)
    meta["ray"] = meta["cluster"].pop("ray")
    settings = {"repeats": args.repeats, "n": args.n, "warm": WARM, "per_slot": args.per_slot, "slots": list(SLOTS),
                "sleep_s": SLEEP_S, "ceiling_slots": CEILING_SLOTS, "store_n": args.store_n,
                "writer_threads": WRITER_THREADS, "policy_n": args.policy_n if args.policy else None,
                "pushes": PUSHES if args.policy else None, "only_overhead": args.only_overhead}
    rows: list[dict[str, Any]] = []
    not_measured: dict[str, str] = {}
    if args.only_overhead:
        not_measured["throughput"] = not_measured["ceiling"] = "run with --only-overhead"
    if not args.pg and not args.only_overhead:
        not_measured["postgresql"] = "no PostgreSQL URL (--pg or QDEVOLVE_BENCH_PG_URL) was given"
    if not args.policy:
        not_measured["policy"] = "run without --policy"

    def save() -> None:
        write_raw(args.raw, {"settings": settings, "goals": GOALS, "not_measured": not_measured, "rows": rows},
                  command=command, seeds=[], meta=meta)  # nothing random: no seeds

    with tempfile.TemporaryDirectory(prefix="qdevolve-bench-ray-") as d:
        work = Path(d)
        policy = None
        if args.policy:
            try:
                policy = PolicyBench(work)
            except ImportError as exc:  # no rl extra
                not_measured["policy"] = f"{type(exc).__name__}: {exc}"
        for k in range(args.repeats):
            rows += overhead(args.address, work, args.n, k)
            if not args.only_overhead:
                rows += scaling(args.address, work, args.per_slot, k)
                rows.append(controller_cpu(args.address, work, args.n, k))
                rows.append(store_tx(str(work / f"ceiling-{k}.sqlite"), "sqlite", args.store_n, k))
                if args.pg:
                    try:
                        rows.append(store_tx(args.pg, "postgresql", args.store_n, k))
                    except Exception as exc:  # the server went away: say so rather than lose the rest
                        not_measured["postgresql"] = f"repeat {k}: {type(exc).__name__}: {str(exc)[:300]}"
                        args.pg = None
            if policy is not None:
                rows += policy.run(args.address, args.policy_n, k)
            save()
            print(f"repeat {k + 1}/{args.repeats} written (load {_load():.1f})", flush=True)
    save()
    import importlib.util  # the renderer by path (benchmarks/reports is not a package)

    spec = importlib.util.spec_from_file_location("bench_report_ray", ROOT / "benchmarks" / "reports" / "ray_bench.py")
    assert spec is not None and spec.loader is not None
    report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(report)
    out = report.render(json.loads((ROOT / "benchmarks" / "results" / f"{args.raw}.json").read_text()))
    print("\n\n".join(out.values()))


if __name__ == "__main__":
    main()
