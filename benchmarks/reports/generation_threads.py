"""Threads, OpenMP wait policy and dtype of the ``transformers`` backend's sampler under load
(``benchmarks/bench_generation_threads.py``) from ``benchmarks/results/generation_threads.json``
alone.

A measurement of the raw file is one batch sampled by one row's child process (a row: threads,
``OMP_WAIT_POLICY``, dtype) in one round; every round measures every row once, in rotating order.
Definitions, per row:

* **tokens/s (wall), per round**: generated tokens over the batch's wall seconds, in round order;
  then their median and range (min to max);
* **tokens per CPU-second**: generated tokens over the child's CPU seconds (all its threads):
  median and range over rounds; what a token costs whatever the load left;
* **CPU share**: CPU seconds over wall seconds over threads, median over rounds: the share of its
  threads' time the process got;
* **ratios to the reference** (the raw file's ``reference`` row, 1 thread float32): per round,
  the row's figure over the reference's figure of the same round; the median of those ratios with
  its 90 % percentile-bootstrap interval over rounds (``_raw.bootstrap_interval``, statistic
  median); for CPU per token the ratio is of CPU seconds per token (> 1: a token costs more);
* **load**: min to max of the 1-minute load average before and after the row's measurements.

The reading judges, per row, "a token costs more CPU than with the reference" (CPU-per-token
ratio > 1) and the opposite (< 1) by ``_raw.verdict``: **holds** when the whole interval is on
that side of 1; when neither holds it says the interval shows no difference.

Keys: ``setup``, ``table``, ``reading``, ``load``; ``cpu`` (the CPU model and its vector flags,
where recorded) and ``bf16_hardware`` (``yes`` when the CPU reports ``avx512_bf16`` or
``amx_bf16``, else ``no``); figures ``cpu_ratio-<row>``,
``wall_ratio-<row>``, ``tps-<row>`` (median tokens/s), ``tpc-<row>`` (median tokens per
CPU-second), ``cpu_verdict-<row>`` (the reading's phrase for that row), ``<row>`` a row key such
as ``t2_unset_float32``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _raw import Interval, bootstrap_interval, verdict  # noqa: E402


def median(x: np.ndarray) -> float:
    x = np.sort(np.asarray(x, dtype=float))
    return float((x[(len(x) - 1) // 2] + x[len(x) // 2]) / 2)


def tps(m: dict[str, Any]) -> float:
    return m["tokens"] / m["wall_s"]


def cpu_per_token(m: dict[str, Any]) -> float:
    return m["cpu_s"] / m["tokens"]


def label(row: dict[str, Any]) -> str:
    """``2 threads with spinning workers (OMP_WAIT_POLICY unset)``, ``1 thread in bfloat16``."""
    t, omp = row["threads"], row["omp_wait_policy"]
    text = f"{t} thread{'s' * (t != 1)}"
    if t > 1:
        text += (" with spinning workers (`OMP_WAIT_POLICY` unset)" if omp == "unset"
                 else f" with `OMP_WAIT_POLICY={omp}`")
    elif omp != "unset":
        text += f" (`OMP_WAIT_POLICY={omp}`)"
    return text + ("" if row["dtype"] == "float32" else f" in {row['dtype']}")


def judged(c: Interval) -> str:
    """The CPU-per-token ratio read by rule (module docstring)."""
    more, less = verdict(c, 1.0, "greater"), verdict(c, 1.0, "less")
    if more == "holds":
        return "more CPU per token: holds"
    if less == "holds":
        return "less CPU per token: holds"
    if more == "holds in the mean":
        return "more only in the mean: the interval contains 1"
    if less == "holds in the mean":
        return "less only in the mean: the interval contains 1"
    return "no difference"


def by_row(raw: dict[str, Any]) -> dict[str, dict[int, dict[str, Any]]]:
    """row key -> round -> measurement."""
    out: dict[str, dict[int, dict[str, Any]]] = {}
    for m in raw["measurements"]:
        out.setdefault(m["row"], {})[m["round"]] = m
    return out


def paired(runs: dict[int, dict[str, Any]], ref: dict[int, dict[str, Any]], figure: Any) -> Interval | None:
    common = sorted(set(runs) & set(ref))
    if not common:
        return None
    return bootstrap_interval([figure(runs[k]) / figure(ref[k]) for k in common], median)


def _iv(iv: Interval | None) -> str:
    if iv is None:
        return "no common round"
    if not iv.has_interval:
        return f"{iv.estimate:.2f}x (1 round, no interval)"
    return f"{iv.estimate:.2f}x ({iv.lo:.2f}x to {iv.hi:.2f}x)"


def _range(xs: list[float], fmt: str) -> str:
    return f"{fmt.format(median(np.array(xs)))} ({fmt.format(min(xs))} to {fmt.format(max(xs))})"


def _loads(ms: list[dict[str, Any]]) -> list[float]:
    return [x[k]["load1"] for x in ms for k in ("load_before", "load_after")]


def render(raw: dict[str, Any]) -> dict[str, str]:
    s = raw["settings"]
    rows = {r["key"]: r for r in s["rows"]}
    data = by_row(raw)
    ref_key = s["reference"]
    ref = data.get(ref_key, {})
    out: dict[str, str] = {}
    lines = ["| threads | `OMP_WAIT_POLICY` | dtype | tokens/s (wall), per round | tokens/s: median (range) | "
             "tokens per CPU-second: median (range) | CPU share of its threads | tokens/s / reference "
             "(90 % interval) | CPU per token / reference (90 % interval) | load |",
             "|---:|---|---|---|---|---|---:|---|---|---|"]
    reading = []
    for key, row in rows.items():
        runs = data.get(key, {})
        if not runs:
            lines.append(f"| {row['threads']} | {row['omp_wait_policy']} | {row['dtype']} | not measured | - | - | - "
                         f"| - | - | - |")
            continue
        ms = [runs[k] for k in sorted(runs)]
        t = [tps(m) for m in ms]
        tpc = [m["tokens"] / m["cpu_s"] for m in ms]
        share = median(np.array([m["cpu_s"] / m["wall_s"] / row["threads"] for m in ms]))
        loads = _loads(ms)
        omp = row["omp_wait_policy"] + (" (libgomp spins)" if row["omp_wait_policy"] == "unset"
                                        and row["threads"] > 1 else "")
        out[f"tps-{key}"] = f"{median(np.array(t)):.1f}"
        out[f"tpc-{key}"] = f"{median(np.array(tpc)):.0f}"
        if key == ref_key:
            wall_rel = cpu_rel = "reference"
        else:
            w, c = paired(runs, ref, tps), paired(runs, ref, cpu_per_token)
            wall_rel, cpu_rel = _iv(w), _iv(c)
            if c is not None and w is not None:
                out[f"cpu_ratio-{key}"], out[f"wall_ratio-{key}"] = _iv(c), _iv(w)
                out[f"cpu_verdict-{key}"] = judged(c)
                iv = f"{c.lo:.2f}x to {c.hi:.2f}x; " if c.has_interval else "no interval; "
                reading.append(f"{label(row)}: {c.estimate:.2f}x the CPU per token ({iv}{judged(c)}) and "
                               f"{w.estimate:.2f}x the wall tokens/s")
        lines.append(f"| {row['threads']} | {omp} | {row['dtype']} | {', '.join(f'{x:.1f}' for x in t)} | "
                     f"{_range(t, '{:.1f}')} | {_range(tpc, '{:.0f}')} | {share:.0%} | {wall_rel} | {cpu_rel} | "
                     f"{min(loads):.1f}-{max(loads):.1f} |")
    all_loads = _loads(raw["measurements"]) or [float("nan")]
    out["load"] = f"{min(all_loads):.1f} to {max(all_loads):.1f}"
    done = s.get("rounds_done", len({m["round"] for m in raw["measurements"]}))
    out["table"] = "\n".join(lines)
    out["setup"] = (f"{s['model']} in the `transformers` backend, same-process sampler, batch {s['batch']} = "
                    f"{s['batch'] // s['group']} prompts x {s['group']}, {s['new_tokens']} new tokens, temperature "
                    f"{s.get('temperature', 0.8)}; one child process per row (its `OMP_WAIT_POLICY` set before torch "
                    f"loads), model loaded and warmed up before the first round; {done} round"
                    f"{'s' * (done != 1)}, each measuring every row once, rows alternating in rotating order"
                    + (f" ({s['stopped']})" if s.get("stopped") else "")
                    + f"; 1-minute load average {out['load']} over the measurements; intervals: 90 % bootstrap over "
                    f"rounds of the per-round ratio to the same round's reference row.")
    n_ref = len(ref)
    ref_label = label(rows[ref_key]) + (" in float32" if rows[ref_key]["dtype"] == "float32" else "")
    cpu = s.get("cpu") or {}
    if cpu:
        flags = cpu.get("flags", {})
        has = [f for f, v in flags.items() if v]
        lacks = [f for f, v in flags.items() if not v]
        caps = sorted({r.get("child", {}).get("cpu_capability") for r in s["rows"]} - {None})
        out["cpu"] = (f"CPU {cpu.get('model') or 'not recorded'}: " + (", ".join(has) or "none of the flags checked")
                      + (f"; no {', '.join(lacks)}" if lacks else "")
                      + (f"; torch's CPU capability {', '.join(caps)}" if caps else "") + ".")
        out["bf16_hardware"] = ("yes" if flags.get("avx512_bf16") or flags.get("amx_bf16") else "no")
        out["setup"] += " " + out["cpu"]
    out["reading"] = (f"Against {ref_label}, per round (median of the ratios over {n_ref} round"
                      f"{'s' * (n_ref != 1)}, 90 % interval): " + "; ".join(reading) + "."
                      if reading else "No row compared with the reference.")
    return out
