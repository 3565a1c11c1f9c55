"""``examples/small_model_knapsack`` with SmolLM2-135M on several run seeds
(``benchmarks/bench_small_model.py``), from ``benchmarks/results/small_model.json`` (the
in-process ``transformers`` backend) and ``small_model_llamacpp.json`` (an earlier run through
llama.cpp's server, with the example's earlier mix of operators).

Per run seed: the seed's score, the best score (bold when it beats the seed), replies parsed
into a child and children that evaluated ok (per operator), tokens/s over the run's wall time.
The summary pools the replies of all seeds: the parse rate and its 90 % bootstrap interval
over run seeds (seeds resampled, replies pooled within each resample: ``_raw.bootstrap_interval``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _raw import bootstrap_interval  # noqa: E402

RAW_NAMES = ("small_model_llamacpp",)


def _counts(run: dict[str, Any]) -> dict[str, dict[str, float]] | None:
    """Per operator counts, or ``None`` for a run recorded before counts were kept."""
    replies = run.get("replies")
    return replies if isinstance(replies, dict) else None


def _cell(per_op: dict[str, dict[str, float]], key: str) -> str:
    total = sum(c.get(key, 0) for c in per_op.values())
    n = sum(c.get("replies", 0) for c in per_op.values())
    ops = ", ".join(f"{op} {per_op[op].get(key, 0)}/{per_op[op].get('replies', 0)}" for op in sorted(per_op))
    return f"{100 * total / n:.1f} % ({ops})" if n else "-"


def _pooled_share(rows: np.ndarray) -> float:
    return float(rows[:, 0].sum() / max(rows[:, 1].sum(), 1))


def render(raw: dict[str, Any]) -> dict[str, str]:
    runs = sorted(raw["runs"], key=lambda r: r["seed"])
    lines = ["| run seed | seed score | best score | parsed into a child | children ok | tokens/s over the run | wall |",
             "|---|---|---|---|---|---|---|"]
    shares = []
    for r in runs:
        best = f"{r['best_score']:.4f}"
        if r["improved"]:
            best = f"**{best}**"
        per_op = _counts(r)
        if per_op is None:  # the earlier llama.cpp run kept the summary's rows as text
            lines.append(f"| {r['seed']} | {r['seed_score']:.4f} | {best} | - | {r['parse_rate']} | "
                         f"{r['tokens_s']} | {r['wall_s']:.0f} s |")
            continue
        tokens = sum(c.get("tokens", 0) for c in per_op.values())
        lines.append(f"| {r['seed']} | {r['seed_score']:.4f} | {best} | {_cell(per_op, 'parsed')} | "
                     f"{_cell(per_op, 'ok')} | {tokens / r['wall_s']:.1f} | {r['wall_s']:.0f} s |")
        shares.append((sum(c.get("parsed", 0) for c in per_op.values()),
                       sum(c.get("replies", 0) for c in per_op.values()),
                       sum(c.get("ok", 0) for c in per_op.values())))
    improved = sum(r["improved"] for r in runs)
    iterations = (raw.get("settings") or {}).get("iterations")
    summary = f"improved its seed on {improved} of {len(runs)} run seeds"
    if iterations:
        summary += f" ({iterations} children each)"
    if shares:
        parsed = bootstrap_interval([(p, n) for p, n, _ in shares], _pooled_share)
        ok = bootstrap_interval([(k, n) for _, n, k in shares], _pooled_share)
        summary += (f"; replies parsed into a child {100 * parsed.estimate:.1f} % (90 % interval "
                    f"{100 * parsed.lo:.1f} to {100 * parsed.hi:.1f} % over run seeds), children ok "
                    f"{100 * ok.estimate:.1f} % ({100 * ok.lo:.1f} to {100 * ok.hi:.1f} %)"
                    if parsed.lo is not None else f"; replies parsed into a child {100 * parsed.estimate:.1f} %")
    return {"table": "\n".join(lines), "summary": summary}
