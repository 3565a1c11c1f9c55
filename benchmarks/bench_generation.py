"""Sampling speed of the ``transformers`` backend on a real model, beside llama.cpp's server on
the same GGUF and this machine's roofline, measured in one run.

For each batch size B (default 1, 8, 32) and each seed the backend samples B continuations of
``--new-tokens`` tokens (``--group G`` continuations per prompt, so B/G prompts, each
prefilled once) and records generated tokens, wall seconds, this process's CPU seconds and
the load average. llama.cpp's OpenAI-compatible server (``--llama-url``; started here from
``--llama-python -m llama_cpp.server`` when nothing answers and that module is importable)
answers the same chat prompt once per seed, single stream. The roofline for one decoding
step of a model with ``P`` parameters of ``s`` bytes at batch B is

    t_step >= max(2 P B / F, s P / W)      tokens/s <= B / t_step

with ``F`` the measured matmul rate (1024^3, the model's dtype, ``--threads`` threads, best of
1 s) and ``W`` the measured memory bandwidth (copying 256 MiB: read + write bytes over time).

Threads: OpenMP workers that spin while they wait (libgomp's default) lose their time slice
to a descheduled partner on a machine whose cores other processes use; there 2 threads ran
10x slower than 1 (BENCHMARKS.md, "Sampling a real model"). ``--omp-wait passive`` (the
default) sets ``OMP_WAIT_POLICY=PASSIVE`` before torch loads (it is read once, when the
OpenMP runtime starts), ``active`` sets ACTIVE, ``inherit`` leaves the environment alone.

    python benchmarks/bench_generation.py                 # batches 1,8,32, 64 tokens, 3 seeds
    python benchmarks/bench_generation.py --quick         # 1 seed, 32 tokens: < 3 min on 2 idle cores
    taskset -c 0,1 python benchmarks/bench_generation.py  # pin to the cores meant to be idle

Raw results: ``benchmarks/results/generation.json`` (``--out``); tables:
``benchmarks/reports/generation.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROMPT = ("Write a Python function `pack(n)` that returns n (x, y, r) circles inside the unit square "
          "with no overlaps, maximising the sum of radii. Reply with code only. Variant {i}.")
TEMPERATURE = 0.8


def matmul_gflops(dtype: Any, seconds: float = 1.0) -> float:
    """Measured GFLOPS of a 1024^3 matmul in ``dtype`` (best of repeated runs for ``seconds``)."""
    import torch

    a, b = torch.randn(1024, 1024, dtype=dtype), torch.randn(1024, 1024, dtype=dtype)
    a @ b
    best, end = float("inf"), time.monotonic() + seconds
    while time.monotonic() < end:
        t = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t)
    return 2 * 1024**3 / best / 1e9


def bandwidth_gbs(seconds: float = 1.0) -> float:
    """Measured memory bandwidth in GB/s: copying a 256 MiB float32 tensor (read + write)."""
    import torch

    src = torch.ones(64 * 1024 * 1024)
    dst = torch.empty_like(src)
    dst.copy_(src)
    best, end = float("inf"), time.monotonic() + seconds
    while time.monotonic() < end:
        t = time.perf_counter()
        dst.copy_(src)
        best = min(best, time.perf_counter() - t)
    return 2 * src.numel() * 4 / best / 1e9


def roofline(params: int, bytes_per_param: int, batch: int, gflops: float, gbs: float) -> float:
    """Upper bound on tokens/s for one decoding step at ``batch`` (module docstring)."""
    step = max(2 * params * batch / (gflops * 1e9), bytes_per_param * params / (gbs * 1e9))
    return batch / step


def bench_backend(backend: Any, batch: int, group: int, new_tokens: int, seed: int) -> dict[str, Any]:
    """One batch of ``batch`` rows: tokens, wall and CPU seconds, load average."""
    from qdevolve.backends.base import GenerationRequest

    g = min(group, batch)
    # one seed for the whole batch: the backend batches only requests with equal sampling
    # settings (seed included), so per-request seeds would sample B/G separate batches of G
    reqs = [GenerationRequest(messages=[{"role": "user", "content": PROMPT.format(i=i)}], n=g,
                              temperature=TEMPERATURE, max_tokens=new_tokens, seed=seed)
            for i in range(max(1, batch // g))]
    backend.batch_size = batch
    load = os.getloadavg()[0]
    c, t = time.process_time(), time.perf_counter()
    out = backend.generate_sync(reqs)
    dt, cpu = time.perf_counter() - t, time.process_time() - c
    tokens = sum(x.completion_tokens for comps in out for x in comps)
    return {"engine": "transformers", "batch": batch, "seed": seed, "tokens": tokens, "seconds": dt,
            "cpu_seconds": cpu, "loadavg": [load, os.getloadavg()[0]]}


def _post(url: str, body: dict[str, Any], timeout: float) -> dict[str, Any]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def llama_reachable(url: str) -> bool:
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/models", timeout=3) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def start_llama(python: str, gguf: Path, threads: int, port: int) -> tuple[subprocess.Popen | None, str]:
    """llama.cpp's server on ``gguf`` at 127.0.0.1:``port``, or (None, why not)."""
    probe = subprocess.run([python, "-c", "import llama_cpp.server"], capture_output=True, timeout=60)
    if probe.returncode != 0:
        return None, f"llama_cpp.server is not importable by {python}"
    proc = subprocess.Popen([python, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", "smollm2",
                             "--host", "127.0.0.1", "--port", str(port), "--n_threads", str(threads),
                             "--n_ctx", "2048"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    end = time.monotonic() + 120
    while time.monotonic() < end and proc.poll() is None:
        if llama_reachable(url):
            return proc, url
        time.sleep(1)
    proc.terminate()
    return None, f"llama.cpp's server did not answer on {url} within 120 s"


def bench_llama(url: str, model: str, new_tokens: int, seeds: list[int]) -> list[dict[str, Any]]:
    """One single-stream chat completion per seed, each on the prompt variant of its seed (as the
    backend's prompts differ per seed); a first, unrecorded one warms the server."""
    body = {"model": model, "max_tokens": new_tokens, "temperature": TEMPERATURE}
    warm = [{"role": "user", "content": PROMPT.format(i=99)}]
    _post(url.rstrip("/") + "/chat/completions", {**body, "messages": warm, "max_tokens": 4, "seed": 99}, timeout=300)
    runs = []
    for s in seeds:
        load = os.getloadavg()[0]
        t = time.perf_counter()
        msgs = [{"role": "user", "content": PROMPT.format(i=s)}]
        out = _post(url.rstrip("/") + "/chat/completions", {**body, "messages": msgs, "seed": s}, timeout=900)
        dt = time.perf_counter() - t
        runs.append({"engine": "llama.cpp", "batch": 1, "seed": s, "tokens": int(out["usage"]["completion_tokens"]),
                     "seconds": dt, "loadavg": [load, os.getloadavg()[0]]})
    return runs


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def _cpu_has(flag: str) -> bool:
    try:
        return f" {flag}" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2-135m-instruct", help="Known model name or HF directory.")
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--seeds", type=int, default=3, help="Repetitions of every batch size (seeds 0..n-1).")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--omp-wait", choices=("passive", "active", "inherit"), default="passive",
                    help="OMP_WAIT_POLICY set before torch loads (module docstring).")
    ap.add_argument("--dtype", default="float32", help="Weights' dtype (float32, bfloat16).")
    ap.add_argument("--group", type=int, default=4, help="Continuations per prompt (sharing its prefill).")
    ap.add_argument("--llama-url", default="http://127.0.0.1:8791/v1", help="llama.cpp's OpenAI server.")
    ap.add_argument("--llama-model", default="smollm2", help="Model name that server serves.")
    ap.add_argument("--llama-python", default=sys.executable,
                    help="Interpreter with llama_cpp.server, to start a server when none answers (default: this one).")
    ap.add_argument("--quick", action="store_true", help="1 seed, 32 new tokens (< 3 min on 2 idle cores).")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "generation.json")
    args = ap.parse_args()
    if args.quick:
        args.seeds, args.new_tokens = 1, 32
    if args.omp_wait != "inherit":
        if "torch" in sys.modules:
            raise SystemExit("--omp-wait must be applied before torch is imported")
        os.environ["OMP_WAIT_POLICY"] = args.omp_wait.upper()

    import torch
    import transformers
    from rich.console import Console
    from rich.markdown import Markdown

    from qdevolve.backends.models import KNOWN_MODELS, source_file
    from qdevolve.backends.transformers_backend import TransformersBackend

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from reports.generation import render

    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    load0 = os.getloadavg()
    seeds = list(range(args.seeds))
    torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype)
    gflops, gbs = matmul_gflops(dtype), bandwidth_gbs()
    backend = TransformersBackend(args.model, threads=args.threads, dtype=args.dtype, max_new_tokens=args.new_tokens)
    params = sum(p.numel() for p in backend.model.parameters())
    bench_backend(backend, 1, 1, 4, seed=99)  # warm-up
    runs = []
    for s in seeds:  # seeds outermost: a load swing spreads over every batch size
        for b in [int(x) for x in args.batches.split(",")]:
            runs.append(bench_backend(backend, b, args.group, args.new_tokens, s))
            r = runs[-1]
            print(f"transformers batch {b} seed {s}: {r['tokens']} tokens in {r['seconds']:.1f} s "
                  f"({r['tokens'] / r['seconds']:.1f} tokens/s), load {r['loadavg'][0]:.1f}", flush=True)
    del backend

    llama: dict[str, Any] = {"url": args.llama_url, "model": args.llama_model, "started_here": False, "runs": []}
    proc = None
    url = args.llama_url
    if not llama_reachable(url):
        if args.model in KNOWN_MODELS:
            proc, url_or_why = start_llama(args.llama_python, source_file(KNOWN_MODELS[args.model]), args.threads, 8792)
            if proc is None:
                llama["status"] = url_or_why
            else:
                url, llama["url"], llama["started_here"], llama["threads"] = url_or_why, url_or_why, True, args.threads
        else:
            llama["status"] = f"no server at {url} and --model is not a GGUF-backed known model"
    if "status" not in llama:
        try:
            llama["runs"] = bench_llama(url, args.llama_model, args.new_tokens, seeds)
            llama["status"] = "measured"
        except (urllib.error.URLError, OSError, KeyError, ValueError) as e:
            llama["status"] = f"request to {url} failed: {e}"
    if proc is not None:
        proc.terminate()
        proc.wait(timeout=30)

    raw = {
        "meta": {"commit": _git("rev-parse", "--short", "HEAD"), "dirty": bool(_git("status", "--porcelain")),
                 "date": started, "command": " ".join([Path(sys.executable).name, *sys.argv]),
                 "loadavg": {"before": list(load0), "after": list(os.getloadavg())},
                 "machine": {"cpu_count": os.cpu_count(), "cpu": _cpu_model(), "avx512_bf16": _cpu_has("avx512_bf16"),
                             "affinity": sorted(os.sched_getaffinity(0)), "nice": os.nice(0),
                             "torch": torch.__version__, "transformers": transformers.__version__},
                 "seeds": seeds},
        "settings": {"model": args.model, "params": params, "dtype": args.dtype, "threads": args.threads,
                     "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", ""), "new_tokens": args.new_tokens,
                     "group": args.group, "temperature": TEMPERATURE, "top_p": 1.0, "quick": args.quick},
        "roofline": {"gflops": gflops, "gbs": gbs, "bytes_per_param": torch.finfo(dtype).bits // 8,
                     "tokens_per_s": {str(b): roofline(params, torch.finfo(dtype).bits // 8, b, gflops, gbs)
                                      for b in sorted({r["batch"] for r in runs})}},
        "runs": runs,
        "llama_cpp": llama,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(raw, indent=1) + "\n")
    console = Console(width=max(160, Console().width))
    for name, text in render(raw).items():
        if "|" in text:
            console.rule(name)
            console.print(Markdown(text))
    console.print(f"raw results: {args.out}")


if __name__ == "__main__":
    main()
