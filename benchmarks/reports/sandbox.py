"""Per-evaluation overhead of the sandbox backends (``benchmarks/bench_sandbox.py``), from
``benchmarks/results/sandbox.json`` alone.

Definitions, per backend that was measured (``n`` sequential evaluations of a trivial program):

* **p50**: the median of the ``n`` latencies (as ``numpy.median``), with its 90 % percentile-bootstrap
  interval over the evaluations (``_raw.bootstrap_interval``, statistic median: the evaluations
  are the resampled units);
* **p90**: the nearest-rank 90th percentile, the ``ceil(0.9 n)``-th smallest latency;
* **CPU / eval**: the CPU seconds of every process involved over the ``n`` evaluations, divided by
  ``n`` (not recorded for Docker, whose work is in the container runtime);
* **evals/s**: the evaluations of the throughput run divided by its wall seconds (2 worker threads);
* **ratios to the reference**: the reference row is ``in-process`` when measured, else the
  measured backend with the lowest p50; the p50 ratio is median / median of the reference with a
  bootstrap interval over rows of (latency, reference latency) (NaN-padded to the longer of the
  two samples, the median of each column's values); CPU and rate ratios are plain quotients (one figure each);
* **goal**: the claim "p50 < goal" (goals from the raw file's settings) judged by ``_raw.verdict``
  on the p50 interval: **holds** when the whole interval is below the goal;
* **warm vs cold** (table ``warm``): p50 of the cold path / p50 of its warm path, with the same
  paired-row bootstrap; the claim "the warm path is faster" (ratio > 1) judged by ``_raw.verdict``;
  CPU cold / warm and evals/s warm / cold as plain quotients.

A backend that could not run here is listed as skipped with its recorded reason; one that failed
while measured, as failed.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _raw import Interval, bootstrap_interval, verdict  # noqa: E402

WARM_PAIRS = (("local", "local warm"), ("bwrap", "bwrap warm"), ("docker fresh", "docker warm"))
LABELS = {"in-process": "in-process (OpenEvolve-style, no isolation)", "local": "local, cold",
          "local warm": "local, warm", "bwrap": "bwrap, cold", "bwrap warm": "bwrap, warm",
          "docker fresh": "docker, fresh container", "docker warm": "docker, warm container"}


def median(x: np.ndarray) -> float:
    """The median of the values that are not NaN (the mean of the two middle ones for an even count,
    as ``numpy.median``; by one sort, several times faster on the bootstrap's small arrays); NaN
    when there is none."""
    x = np.sort(x)  # NaN sorts last
    m = int(np.count_nonzero(~np.isnan(x)))
    return float("nan") if m == 0 else float((x[(m - 1) // 2] + x[m // 2]) / 2)


def p50(row: dict[str, Any]) -> Interval:
    """The median latency (ms) of a measured row with its bootstrap interval over evaluations."""
    return bootstrap_interval(row["latency_ms"], median)


def p90(row: dict[str, Any]) -> float:
    """The nearest-rank 90th percentile of the latencies (ms)."""
    xs = sorted(row["latency_ms"])
    return xs[max(math.ceil(0.9 * len(xs)) - 1, 0)]


def cpu_ms(row: dict[str, Any]) -> float | None:
    """CPU milliseconds per evaluation, ``None`` where not recorded (docker)."""
    return None if row.get("cpu_s") is None else 1000 * row["cpu_s"] / row["n"]


def rate(row: dict[str, Any]) -> float:
    """Evaluations per second of the throughput run."""
    t = row["throughput"]
    return t["evaluations"] / t["wall_s"]


def _median_ratio(rows: np.ndarray) -> float:
    """NaN when a resample lacks one of the samples (only likely with very unequal counts)."""
    return median(rows[:, 0]) / median(rows[:, 1])


def latency_ratio(num: dict[str, Any], den: dict[str, Any]) -> Interval:
    """median(num) / median(den) with a bootstrap interval over NaN-padded rows (num_i, den_i);
    without an interval when a resample lacks one of the samples."""
    a, b = num["latency_ms"], den["latency_ms"]
    width = max(len(a), len(b))
    rows = [(a[i] if i < len(a) else math.nan, b[i] if i < len(b) else math.nan) for i in range(width)]
    try:
        return bootstrap_interval(rows, _median_ratio)
    except ValueError:
        return Interval(median(np.asarray(a)) / median(np.asarray(b)), None, None, 0.9, width)


def _num(x: float) -> str:
    return f"{x:.2f}" if abs(x) < 10 else f"{x:.1f}"


def _ratio(x: float) -> str:
    return f"{x:.0f}x" if x >= 100 else f"{x:.1f}x" if x >= 10 else f"{x:.2f}x"


def _with_interval(iv: Interval, fmt: Any) -> str:
    return f"{fmt(iv.estimate)} ({fmt(iv.lo)} to {fmt(iv.hi)})" if iv.has_interval else f"{fmt(iv.estimate)} (no interval)"


def _reason(row: dict[str, Any]) -> str:
    text = " ".join(str(row.get("reason", "no reason recorded")).split()).replace("|", "\\|")
    text = text if len(text) <= 160 else text[:157] + "..."
    stage = f" at {row['stage']}" if row.get("stage") else ""
    return f"{row['status']}{stage}: {text}"


def reference(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """``in-process`` when measured, else the measured row with the lowest p50."""
    measured = [r for r in rows if r["status"] == "measured"]
    for r in measured:
        if r["name"] == "in-process":
            return r
    return min(measured, key=lambda r: median(np.asarray(r["latency_ms"])), default=None)


def render(raw: dict[str, Any]) -> dict[str, str]:
    s, rows = raw["settings"], raw["backends"]
    goals = s.get("goals_p50_ms", {})
    by_name = {r["name"]: r for r in rows}
    ref = reference(rows)
    ref_name = ref["name"] if ref else "-"
    workers = s.get("workers", 2)
    lines = [f"| backend | n | p50 ms (90 % interval) | p90 ms | CPU ms / eval | evals/s ({workers} workers) | "
             f"p50 / {ref_name} (90 % interval) | CPU / {ref_name} | goal: p50 below |",
             "|---|---:|---|---:|---:|---:|---|---:|---|"]
    judged: dict[str, list[str]] = {}
    for r in rows:
        label = LABELS.get(r["name"], r["name"])
        if r["status"] != "measured":
            goal = f"{goals[r['name']]:.0f} ms: not measured" if r["name"] in goals else "-"
            lines.append(f"| {label} | - | {_reason(r)} | - | - | - | - | - | {goal} |")
            continue
        iv = p50(r)
        cpu = cpu_ms(r)
        if r is ref:
            rel, rel_cpu = "reference", "reference"
        else:
            rel = _with_interval(latency_ratio(r, ref), _ratio)
            ref_cpu = cpu_ms(ref)
            rel_cpu = "-" if cpu is None or not ref_cpu else _ratio(cpu / ref_cpu)
        goal = "-"
        if r["name"] in goals:
            v = verdict(iv, goals[r["name"]], "less")
            judged.setdefault(v, []).append(r["name"])
            goal = f"{goals[r['name']]:.0f} ms: {v}"
        lines.append(f"| {label} | {r['n']} | {_with_interval(iv, _num)} | {_num(p90(r))} | "
                     f"{'-' if cpu is None else _num(cpu)} | {_num(rate(r))} | {rel} | {rel_cpu} | {goal} |")

    warm = ["| warm path | p50 cold / warm (90 % interval) | claim \"warm is faster\" (ratio > 1) | CPU cold / warm | "
            "evals/s warm / cold |", "|---|---|---|---:|---:|"]
    for cold_name, warm_name in WARM_PAIRS:
        cold, hot = by_name.get(cold_name), by_name.get(warm_name)
        if cold is None and hot is None:
            continue
        label = LABELS.get(warm_name, warm_name)
        missing = [f"{n} {'not run' if r is None else r['status']}" for n, r in ((cold_name, cold), (warm_name, hot))
                   if r is None or r["status"] != "measured"]
        if missing:
            warm.append(f"| {label} | not compared: {', '.join(missing)} | - | - | - |")
            continue
        iv = latency_ratio(cold, hot)
        c_cold, c_hot = cpu_ms(cold), cpu_ms(hot)
        cpu = "-" if c_cold is None or not c_hot else _ratio(c_cold / c_hot)
        warm.append(f"| {label} | {_with_interval(iv, _ratio)} | {verdict(iv, 1.0, 'greater')} | {cpu} | "
                    f"{_ratio(rate(hot) / rate(cold))} |")

    n_docker = s.get("n_docker_fresh")
    setup = (f"Trivial program and evaluator; per backend {s['n']} evaluations one at a time after {s.get('warmup', 3)} "
             f"warm-up runs" + (f" (docker fresh: {n_docker})" if "docker fresh" in by_name and n_docker else "")
             + f", CPU over those evaluations, rate over {s['throughput']} evaluations on {workers} worker threads"
             + (f" (docker fresh: {s['docker_fresh_throughput']})" if "docker fresh" in by_name
                and s.get("docker_fresh_throughput") else "")
             + f"; running as {'root' if s.get('as_root') else 'a user'}. Intervals: 90 % bootstrap over evaluations "
               f"(nothing is random here, so there are no seeds); reference row: {ref_name}.")
    counted = sum(len(v) for v in judged.values())
    summary = ("Goals (p50 below the goal, by the 90 % interval over evaluations): " + "; ".join(
        f"{v}: {', '.join(judged[v])}" for v in ("holds", "holds in the mean", "does not hold") if v in judged)
        + f" ({counted} judged)." if counted else "Goals: none judged (no backend with a goal was measured).")
    skipped = [r for r in rows if r["status"] != "measured"]
    if skipped:
        summary += " Not measured: " + "; ".join(f"{r['name']} ({_reason(r)})" for r in skipped) + "."
    return {"setup": setup, "table": "\n".join(lines),
            "warm": "\n".join(warm), "summary": summary}
