"""Controller CPU per evaluation with and without the compatibility paths
(``benchmarks/bench_compat.py``), from ``benchmarks/results/compat.json`` alone.

Each repeat runs both configurations back to back on the same run seed; the units of every
interval are the repeats. Definitions, per configuration (path):

* **CPU ms / eval**: a run's controller CPU seconds (``RUSAGE_SELF``; the sandboxes are child
  processes and not counted) divided by its evaluations; the table gives the median over repeats
  with its 90 % percentile-bootstrap interval over repeats (``_raw.bootstrap_interval``,
  statistic median) and the nearest-rank p90 over repeats (the ``ceil(0.9 k)``-th smallest of
  ``k`` repeats);
* **evals/s**: a run's evaluations divided by its wall seconds, median over repeats;
* **ratio to the reference** (``native``): per repeat, the path's figure divided by the
  reference's of the same repeat; the median of those ratios with its bootstrap interval over
  repeats;
* **claim** "the compatibility paths cost more controller CPU than the native config" (CPU ratio
  > 1), judged by ``_raw.verdict``: **holds** when the whole interval is above 1; the opposite
  claim (ratio < 1) is judged the same way, and when neither holds the summary says the interval
  shows no difference.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _raw import Interval, bootstrap_interval, verdict  # noqa: E402

LABELS = {"native": "native config (`code_length` × Jaccard `diversity`)",
          "compat": "compatibility paths (a feature read from the metrics, OpenEvolve's `complexity` and "
                    "`code_diversity`, a `budget` section with prices)"}


def median(x: np.ndarray) -> float:
    """The median (the mean of the two middle values for an even count, as ``numpy.median``, by one
    sort: several times faster on the bootstrap's small arrays)."""
    x = np.sort(x)
    return float((x[(len(x) - 1) // 2] + x[len(x) // 2]) / 2)


def cpu_ms(run: dict[str, Any]) -> float:
    """Controller CPU milliseconds per evaluation of one run."""
    return 1000 * run["cpu_s"] / max(run["evaluations"], 1)


def rate(run: dict[str, Any]) -> float:
    """Evaluations per wall second of one run."""
    return run["evaluations"] / run["wall_s"]


def p90(xs: list[float]) -> float:
    """Nearest-rank 90th percentile."""
    ys = sorted(xs)
    return ys[max(math.ceil(0.9 * len(ys)) - 1, 0)]


def by_config(raw: dict[str, Any]) -> dict[str, dict[int, dict[str, Any]]]:
    """config -> repeat -> run."""
    out: dict[str, dict[int, dict[str, Any]]] = {}
    for r in raw["runs"]:
        out.setdefault(r["config"], {})[r["repeat"]] = r
    return out


def paired_ratio(runs: dict[int, dict[str, Any]], ref: dict[int, dict[str, Any]], figure: Any) -> Interval:
    """Median over the repeats both configs ran of figure(run) / figure(reference run), with its interval."""
    common = sorted(set(runs) & set(ref))
    return bootstrap_interval([figure(runs[k]) / figure(ref[k]) for k in common], median)


def _f(x: float | None, fmt: str = "{:.2f}") -> str:
    return "-" if x is None else fmt.format(x)


def _iv(iv: Interval, fmt: str = "{:.2f}", suffix: str = "") -> str:
    if not iv.has_interval:
        return f"{fmt.format(iv.estimate)}{suffix} (no interval)"
    return f"{fmt.format(iv.estimate)}{suffix} ({fmt.format(iv.lo)}{suffix} to {fmt.format(iv.hi)}{suffix})"


def render(raw: dict[str, Any]) -> dict[str, str]:
    s = raw["settings"]
    configs = by_config(raw)
    ref_name = s.get("reference", "native")
    ref = configs.get(ref_name, {})
    order = [c for c in (s.get("configs") or configs) if c in configs]
    lines = [f"| path | repeats | controller CPU ms / eval: median (90 % interval) | p90 | evals/s (median) | "
             f"CPU / {ref_name} (90 % interval) | evals/s / {ref_name} |", "|---|---:|---|---:|---:|---|---:|"]
    claims = []
    for name in order:
        runs = configs[name]
        cpu = [cpu_ms(runs[k]) for k in sorted(runs)]
        iv = bootstrap_interval(cpu, median)
        rates = median(np.array([rate(runs[k]) for k in sorted(runs)]))
        if name == ref_name or not (set(runs) & set(ref)):
            rel, rel_rate = ("reference", "reference") if name == ref_name else ("no common repeat", "-")
        else:
            r_cpu = paired_ratio(runs, ref, cpu_ms)
            r_rate = paired_ratio(runs, ref, rate)
            rel, rel_rate = _iv(r_cpu, suffix="x"), f"{r_rate.estimate:.2f}x"
            more, less = verdict(r_cpu, 1.0, "greater"), verdict(r_cpu, 1.0, "less")
            reading = ("costs more controller CPU" if more == "holds" else "costs less controller CPU"
                       if less == "holds" else "no difference shown by the 90 % interval (it contains 1)")
            claims.append(f"{name} / {ref_name} controller CPU per evaluation {_iv(r_cpu, suffix='x')} over "
                          f"{r_cpu.n_units} paired repeats: \"costs more\" (ratio > 1) {more}; \"costs less\" "
                          f"(ratio < 1) {less}; reading: {reading}.")
        lines.append(f"| {LABELS.get(name, name)} | {len(runs)} | {_iv(iv)} | {p90(cpu):.2f} | {rates:.1f} | "
                     f"{rel} | {rel_rate} |")
    evals = sorted({r["evaluations"] for r in raw["runs"]})
    setup = (f"Tiny example, {s.get('mutator', 'ast')} mutator, `{s.get('sandbox', 'local')}` sandbox, "
             f"{s.get('workers', 2)} workers, {s['iterations']} iterations per run "
             f"({evals[0] if len(evals) == 1 else f'{evals[0]}-{evals[-1]}'} evaluations), both paths back to back "
             f"on the same run seed in each of {s['repeats']} repeats; intervals: 90 % bootstrap over repeats.")
    return {"setup": setup, "table": "\n".join(lines), "summary": " ".join(claims) or "No path compared."}
