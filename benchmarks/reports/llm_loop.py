"""The LLM loop at equal model concurrency (``benchmarks/bench_llm_loop.py --raw llm_loop``) from
``benchmarks/results/llm_loop.json``: successful evaluations per second of qdevolve and OpenEvolve
against the same scripted server, per model latency; the ratio qdevolve / OpenEvolve is taken per
back-to-back pair (repeat) and summarised by its median with a 90 % bootstrap interval over the
pairs (``_raw.bootstrap_interval``); the claim "qdevolve is at least as fast" (ratio > 1) is judged
by ``_raw.verdict``."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _raw import bootstrap_interval, verdict  # noqa: E402


def _rate(r: dict[str, Any]) -> float:
    return r["successful"] / r["wall_s"]


def _spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})"


def _cpu_ms(pairs: list[tuple[dict[str, Any], dict[str, Any]]], i: int) -> float:
    """Median controller CPU per evaluated child, in ms (the framework's own process only: qdevolve's
    sandbox processes and OpenEvolve's worker processes are excluded alike)."""
    return statistics.median(1000 * p[i]["cpu_s"] / max(p[i]["evaluated"], 1) for p in pairs)


def _pairs(raw: dict[str, Any], latency: float) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    rows = [r for r in raw["rows"] if r["latency_s"] == latency]
    q = {r["repeat"]: r for r in rows if r["framework"] == "qdevolve"}
    o = {r["repeat"]: r for r in rows if r["framework"] == "openevolve"}
    return [(q[k], o[k]) for k in sorted(set(q) & set(o))]


def _interval(pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> Any:
    return bootstrap_interval([_rate(a) / _rate(b) for a, b in pairs], np.median)


def render(raw: dict[str, Any]) -> dict[str, str]:
    s = raw["settings"]
    sandbox = f"{s['backend']} {'warm' if s['warm'] else 'cold'}"
    lines = ["| model latency | qdevolve sandbox | qdevolve ok evals/s | OpenEvolve ok evals/s | ratio per pair: median "
             "(90 % bootstrap interval) | children evaluated / iterations (qdevolve; OpenEvolve) | controller CPU ms per "
             "child, median (qdevolve; OpenEvolve) | qdevolve >= OpenEvolve |",
             "|---|---|---:|---:|---|---|---|---|"]
    figure = []
    for latency in sorted({r["latency_s"] for r in raw["rows"]}):
        pairs = _pairs(raw, latency)
        iv = _interval(pairs)
        ev = []
        for i in (0, 1):
            lo, hi = min(p[i]["evaluated"] for p in pairs), max(p[i]["evaluated"] for p in pairs)
            ev.append(f"{lo if lo == hi else f'{lo}-{hi}'}/{s['iterations']}")
        lines.append(f"| {latency:.0f} s | {sandbox} | {_spread([_rate(a) for a, _ in pairs])} | "
                     f"{_spread([_rate(b) for _, b in pairs])} | {iv.text('{:.2f}', 'x', 'pair')} | {ev[0]}; {ev[1]} | "
                     f"{_cpu_ms(pairs, 0):.1f}; {_cpu_ms(pairs, 1):.1f} | "
                     f"{verdict(iv, 1.0, 'greater')} |")
        span = f"{iv.lo:.2f}x to {iv.hi:.2f}x" if iv.has_interval else "no interval"
        figure.append(f"{iv.estimate:.2f}x (90 % interval {span}) at {latency:.0f} s model latency")
    n = len(_pairs(raw, raw["rows"][0]["latency_s"]))
    meta = raw["meta"]
    loads = [x[0] for x in (meta.get("loadavg_start"), meta.get("loadavg")) if x]
    load = f", load average {min(loads):.0f}-{max(loads):.0f}" if loads else ""
    summary = (f"qdevolve's throughput at equal model concurrency ({s['concurrency']} requests in flight, clean "
               f"scripted replies, {sandbox} sandbox) as a ratio to OpenEvolve's, median over {n} back-to-back pairs"
               f"{load}: " + ", ".join(figure))
    return {"table": "\n".join(lines), "summary": summary}
