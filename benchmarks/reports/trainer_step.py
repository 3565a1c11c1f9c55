"""The trainer's scoring pass, shared prompt against one pass (``benchmarks/bench_trainer_step.py``),
from ``benchmarks/results/trainer_step.json`` alone.

Per layout and pass (forward + backward of the summed log-probs; forward without gradients): the
median wall seconds over rounds and their range. Per pass, the ratio ``shared / one-pass`` of the
same round, its median over rounds and the 90 % percentile-bootstrap interval over rounds
(``_raw.bootstrap_interval``, statistic median). The claim "sharing the prompt costs less" holds
when the whole interval lies below 1 (``_raw.verdict``). The largest difference between the two
layouts' log-probs over every round is reported beside it (they compute the same quantity).

Keys: ``setup``, ``table``; figures ``train_ratio`` and ``no_grad_ratio`` (the ratio with its
interval and verdict).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _raw import bootstrap_interval, verdict  # noqa: E402

__all__ = ["render"]

PASSES = (("train_s", "forward + backward (the loss)"), ("no_grad_s", "forward, no gradients (reference log-probs)"))


def render(raw: dict[str, Any]) -> dict[str, str]:
    s, rounds = raw["settings"], raw["rounds"]
    n_rows = s["groups"] * s["group"]
    setup = (f"SmolLM2-135M-Instruct ({s['dtype']}) with a LoRA adapter of rank {s['lora_r']}; a batch of "
             f"{s['groups']} groups x {s['group']} completions ({n_rows} rows) of {s['completion_tokens']} tokens "
             f"on prompts of {', '.join(map(str, s['prompt_tokens']))} tokens; {s['threads']} torch "
             f"thread{'s' * (s['threads'] != 1)}; {len(rounds)} rounds, the layouts' order alternating by round.")
    lines = ["| pass | one-pass: median s [range] | shared prompt: median s [range] | shared / one-pass, "
             "median of rounds (90 % interval) | verdict (< 1) |", "|---|---|---|---|---|"]
    out: dict[str, str] = {"setup": setup}
    for key, label in PASSES:
        one = np.array([r["one_pass"][key] for r in rounds], dtype=float)
        shared = np.array([r["shared"][key] for r in rounds], dtype=float)
        iv = bootstrap_interval(shared / one, np.median)
        v = verdict(iv, 1.0, "less")
        text = iv.text("{:.2f}", "x", unit="round")
        lines.append(f"| {label} | {np.median(one):.1f} [{one.min():.1f} to {one.max():.1f}] | "
                     f"{np.median(shared):.1f} [{shared.min():.1f} to {shared.max():.1f}] | {text} | {v} |")
        out[f"{key.removesuffix('_s')}_ratio"] = f"{text}: {v}"
    diff = max(float(r["max_abs_logp_diff"]) for r in rounds)
    lines.append("")
    lines.append(f"Largest difference between the two layouts' per-token log-probs, every round: {diff:.1e}.")
    out["table"] = "\n".join(lines)
    return out
