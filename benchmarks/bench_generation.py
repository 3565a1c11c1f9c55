"""Sampling speed of the ``transformers`` backend on a real model, beside this machine's
roofline and (when ``llama_cpp`` is importable) llama.cpp on the same GGUF.

For each batch size B (default 1, 8, 32) the backend samples B continuations of 64 new
tokens (``--group G`` continuations per prompt, so B/G prompts, each prefilled once) and the
table shows generated tokens per second. The roofline for one decoding step of a model with
``P`` parameters (``4P`` bytes in float32) at batch B is

    t_step >= max(2 P B / F, 4 P / W)      tokens/s <= B / t_step

with ``F`` the measured float32 matmul rate (1024x1024 @ 1024x1024) and ``W`` the measured
memory bandwidth (copying a 256 MiB tensor: read + write bytes over time). Load averages
before and after are printed: on a shared machine the figures move with them.

    python benchmarks/bench_generation.py [--model smollm2-135m-instruct] [--batches 1,8,32]
        [--new-tokens 64] [--threads 2] [--group 4] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROMPT = ("Write a Python function `pack(n)` that returns n (x, y, r) circles inside the unit square "
          "with no overlaps, maximising the sum of radii. Reply with code only. Variant {i}.")


def matmul_gflops(seconds: float = 1.0) -> float:
    """Measured float32 GFLOPS of a 1024^3 matmul (best of repeated runs for ``seconds``)."""
    import torch

    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
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


def roofline(params: int, batch: int, gflops: float, gbs: float) -> float:
    """Upper bound on tokens/s for one float32 decoding step at ``batch`` (module docstring)."""
    step = max(2 * params * batch / (gflops * 1e9), 4 * params / (gbs * 1e9))
    return batch / step


def bench_backend(backend, batch: int, group: int, new_tokens: int) -> tuple[float, int, float]:
    """(tokens/s, tokens generated, seconds) for one batch of ``batch`` rows."""
    from qdevolve.backends.base import GenerationRequest

    g = min(group, batch)
    reqs = [GenerationRequest(messages=[{"role": "user", "content": PROMPT.format(i=i)}], n=g, temperature=0.8,
                              max_tokens=new_tokens, seed=i) for i in range(max(1, batch // g))]
    backend.batch_size = batch
    t = time.perf_counter()
    out = backend.generate_sync(reqs)
    dt = time.perf_counter() - t
    tokens = sum(c.completion_tokens for comps in out for c in comps)
    return tokens / dt, tokens, dt


def bench_llama_cpp(gguf: Path, threads: int, new_tokens: int) -> str:
    """llama.cpp's single-stream tokens/s on the same GGUF, or why there is none."""
    try:
        from llama_cpp import Llama
    except ImportError:
        return "llama.cpp not installed"
    llm = Llama(model_path=str(gguf), n_threads=threads, n_ctx=1024, verbose=False, seed=0)
    msgs = [{"role": "user", "content": PROMPT.format(i=0)}]
    t = time.perf_counter()
    out = llm.create_chat_completion(msgs, max_tokens=new_tokens, temperature=0.8)
    dt = time.perf_counter() - t
    n = out["usage"]["completion_tokens"]
    return f"{n / dt:.1f} tokens/s single stream ({n} tokens in {dt:.1f} s, {threads} threads)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2-135m-instruct", help="Known model name or HF directory.")
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--group", type=int, default=4, help="Continuations per prompt (sharing its prefill).")
    ap.add_argument("--json", type=Path, default=None, help="Also write the figures here.")
    args = ap.parse_args()

    import torch
    from rich.console import Console
    from rich.table import Table

    from qdevolve.backends.models import KNOWN_MODELS, source_file
    from qdevolve.backends.transformers_backend import TransformersBackend

    torch.set_num_threads(args.threads)
    load0 = os.getloadavg()
    gflops, gbs = matmul_gflops(), bandwidth_gbs()
    backend = TransformersBackend(args.model, threads=args.threads, max_new_tokens=args.new_tokens)
    params = sum(p.numel() for p in backend.model.parameters())
    rows = []
    bench_backend(backend, 1, 1, 4)  # warm-up
    for b in [int(x) for x in args.batches.split(",")]:
        tps, tokens, dt = bench_backend(backend, b, args.group, args.new_tokens)
        rows.append({"batch": b, "tokens_per_s": tps, "tokens": tokens, "seconds": dt,
                     "roofline": roofline(params, b, gflops, gbs)})
    llama = (bench_llama_cpp(source_file(KNOWN_MODELS[args.model]), args.threads, args.new_tokens)
             if args.model in KNOWN_MODELS else "llama.cpp: --model is not a known GGUF-backed model")
    load1 = os.getloadavg()

    console = Console()
    table = Table(title=f"transformers backend, {args.model} ({params / 1e6:.1f} M params, float32), "
                        f"{args.threads} threads, {args.new_tokens} new tokens, group {args.group}")
    for col in ("batch", "tokens", "seconds", "tokens/s", "roofline tokens/s", "share of roofline"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(str(r["batch"]), str(r["tokens"]), f"{r['seconds']:.1f}", f"{r['tokens_per_s']:.1f}",
                      f"{r['roofline']:.0f}", f"{r['tokens_per_s'] / r['roofline']:.0%}")
    console.print(table)
    console.print(f"matmul {gflops:.1f} GFLOPS, memory {gbs:.1f} GB/s; {llama}")
    console.print(f"load average before {load0[0]:.2f}, after {load1[0]:.2f} ({os.cpu_count()} CPUs)")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "gflops": gflops, "gbs": gbs, "llama_cpp": llama,
                                         "load": [load0[0], load1[0]], "threads": args.threads}, indent=1))


if __name__ == "__main__":
    main()
