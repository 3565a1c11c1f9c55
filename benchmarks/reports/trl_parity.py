"""Parity with TRL's ``GRPOTrainer`` and one step's time (``benchmarks/bench_trl_parity.py``), from
``benchmarks/results/trl_parity.json`` alone.

Definitions:

* **parity table**, one row per setting (``loss_type``, ``scale_rewards``, ``beta``): the largest
  absolute difference between TRL's and qdevolve's advantages over the batch's completions, both
  losses on the same batch and their absolute difference;
* **parity claim** "qdevolve computes TRL's advantages and loss": **holds** when every advantage
  difference and every loss difference of every row is ``<= tolerance`` (the raw file's
  ``settings.tolerance``, stated before the measurement), **does not hold** otherwise (also when
  there is no row); the summary names the largest difference;
* **step time**, per side: the median of the timed steps' seconds with its 90 % percentile-bootstrap
  interval over the timed steps (``_raw.bootstrap_interval``, statistic median, the steps are the
  resampled units);
* **ratio qdevolve / TRL**: median of qdevolve's step seconds divided by the median of TRL's; its
  interval resamples the timed steps as pairs (step ``i`` of both sides ran back to back), taking
  the ratio of the two columns' medians in each resample;
* **timing claim** "qdevolve's step is faster than TRL's" (ratio < 1), judged by ``_raw.verdict``:
  **holds** when the whole interval is below 1, **holds in the mean** when only the ratio is, **does
  not hold** otherwise; the opposite claim (ratio > 1) is judged the same way, and when neither
  holds the summary says the interval shows no difference.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _raw import Interval, bootstrap_interval, verdict  # noqa: E402

DEFAULT_TOLERANCE = 1e-6


def median(x: np.ndarray) -> float:
    """The median (the mean of the two middle values for an even count, as ``numpy.median``) by one sort."""
    x = np.sort(x)
    return float((x[(len(x) - 1) // 2] + x[len(x) // 2]) / 2)


def _ratio_of_medians(rows: np.ndarray) -> float:
    """Median of column 1 (qdevolve) / median of column 0 (TRL) of resampled (TRL, qdevolve) rows."""
    return median(rows[:, 1]) / median(rows[:, 0])


def step_intervals(timing: dict[str, Any]) -> tuple[Interval, Interval, Interval]:
    """(TRL median step s, qdevolve median step s, ratio qdevolve / TRL), each with its interval over steps.

    Raises:
        ValueError: the two sides have different numbers of timed steps.
    """
    trl, ours = timing["trl_s"], timing["ours_s"]
    if len(trl) != len(ours):
        raise ValueError(f"trl_parity: {len(trl)} TRL steps but {len(ours)} qdevolve steps; they are timed in pairs")
    return (bootstrap_interval(trl, median), bootstrap_interval(ours, median),
            bootstrap_interval(list(zip(trl, ours, strict=True)), _ratio_of_medians))


def parity_verdict(rows: list[dict[str, Any]], tolerance: float) -> tuple[str, float]:
    """(``holds`` or ``does not hold``, the largest absolute difference) for the parity claim."""
    diffs = [float(r[k]) for r in rows for k in ("adv_max_abs_diff", "loss_abs_diff")]
    worst = max(diffs, default=float("inf"))
    return ("holds" if rows and worst <= tolerance else "does not hold"), worst


def _iv(iv: Interval, fmt: str, suffix: str = "") -> str:
    if not iv.has_interval:
        return f"{fmt.format(iv.estimate)}{suffix} (no interval)"
    return f"{fmt.format(iv.estimate)}{suffix} ({fmt.format(iv.lo)}{suffix} to {fmt.format(iv.hi)}{suffix})"


def _ms(iv: Interval) -> Interval:
    """The interval of seconds in milliseconds."""
    return Interval(1e3 * iv.estimate, None if iv.lo is None else 1e3 * iv.lo, None if iv.hi is None else 1e3 * iv.hi,
                    iv.level, iv.n_units)


def render(raw: dict[str, Any]) -> dict[str, str]:
    s, rows, timing = raw["settings"], raw["rows"], raw.get("timing") or {}
    tol = float(s.get("tolerance", DEFAULT_TOLERANCE))
    v = (raw["meta"].get("versions") or {})
    versions = ", ".join(f"{k} {v[k]}" for k in ("trl", "transformers", "torch") if v.get(k)) or "versions not recorded"
    setup = (f"{versions}, {s.get('device', 'cpu').upper()}; {s['model']}; {s['prompts']} prompts x G = "
             f"{s['group_size']}, max {s['max_new_tokens']} new tokens; policy moved off the sampling policy by "
             f"fixed-seed weight noise ({s.get('noise')}), epsilon {s.get('epsilon')}. Parity tolerance "
             f"{tol:.0e} on every difference.")
    lines = ["| loss_type | scale_rewards | beta | max abs advantage diff | TRL loss | qdevolve loss | abs loss diff "
             "| within tolerance |", "|---|---|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        ok = max(r["adv_max_abs_diff"], r["loss_abs_diff"]) <= tol
        lines.append(f"| {r['loss_type']} | {r['scale_rewards']} | {r['beta']} | {r['adv_max_abs_diff']:.2e} | "
                     f"{r['loss_trl']:.6f} | {r['loss_ours']:.6f} | {r['loss_abs_diff']:.2e} | "
                     f"{'yes' if ok else '**no**'} |")
    parity, worst = parity_verdict(rows, tol)
    summary = [f"Parity claim \"every advantage and loss difference <= {tol:.0e}\" over {len(rows)} settings: "
               f"{parity} (largest difference {worst:.2e})."]
    timing_md = "No step was timed."
    if timing.get("trl_s"):
        t_trl, t_ours, ratio = step_intervals(timing)
        st = s.get("step") or {}
        ts = timing.get("setting") or {}
        timing_md = "\n".join([
            f"| side | one full step | median ms (90 % interval over {ratio.n_units} timed steps) |",
            "|---|---|---:|",
            f"| TRL | {st.get('trl', 'training_step + optimiser step')} | {_iv(_ms(t_trl), '{:.1f}')} |",
            f"| qdevolve | {st.get('ours', 'sample_batch + PolicyTrainer.step')} | {_iv(_ms(t_ours), '{:.1f}')} |",
            f"| ratio qdevolve / TRL | median / median, steps resampled in pairs | {_iv(ratio, '{:.2f}', 'x')} |"])
        faster, slower = verdict(ratio, 1.0, "less"), verdict(ratio, 1.0, "greater")
        reading = ("qdevolve's step is faster" if faster == "holds" else "qdevolve's step is slower"
                   if slower == "holds" else "no difference shown by the 90 % interval (it contains 1)")
        summary.append(
            f"Setting {ts.get('loss_type', '?')} / {ts.get('scale_rewards', '?')} / beta {ts.get('beta', '?')}, "
            f"{ratio.n_units} timed steps per side after {s.get('warmup_steps', 0)} unrecorded "
            f"({s.get('order', 'order not recorded')}): ratio qdevolve / TRL {_iv(ratio, '{:.2f}', 'x')}; "
            f"\"qdevolve's step is faster than TRL's\" (ratio < 1) {faster}; \"slower\" (ratio > 1) {slower}; "
            f"reading: {reading}.")
    return {"setup": setup, "parity": "\n".join(lines), "timing": timing_md, "summary": " ".join(summary)}
