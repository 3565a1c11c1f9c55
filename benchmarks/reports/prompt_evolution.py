"""The prompt-evolution table (``benchmarks/bench_prompt_evolution.py``) and the README's figure,
from ``benchmarks/results/prompt_evolution.json``: per arm and seed, children, model calls, ok
children, the best child (bold when it beats the seed program) and templates proposed / valid."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _raw import bootstrap_interval  # noqa: E402


def _templates(row: dict[str, Any]) -> tuple[int, int]:
    t = row.get("templates") or {}
    return sum(t.values()), sum(v for k, v in t.items() if k != "invalid")


def render(raw: dict[str, Any]) -> dict[str, str]:
    rows = raw["rows"]
    lines = ["| arm | seed | children | model calls | children ok | best child | templates proposed / valid |",
             "|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["seed"], r["arm"] != "fixed")):
        best = f"{r['best']:.4f}"
        if r["best"] > r["seed_score"] + 1e-12:
            best = f"**{best}**"
        proposed, valid = _templates(r)
        tcell = f"{proposed} / {valid}" if r["arm"] == "evolve" else "-"
        lines.append(f"| {r['arm']} | {r['seed']} | {r['children']} | {r['model_calls']} | {r['ok']} | {best} | "
                     f"{tcell} |")
    evolve = [r for r in rows if r["arm"] == "evolve"]
    proposed = sum(_templates(r)[0] for r in evolve)
    valid = sum(_templates(r)[1] for r in evolve)
    seeds = sorted({r["seed"] for r in rows})
    calls = sorted({r["model_calls"] for r in rows})
    calls_text = f"{calls[0]} calls each" if len(calls) == 1 else f"{calls[0]}-{calls[-1]} calls"
    better = sum(1 for s in seeds
                 for e in [r for r in evolve if r["seed"] == s]
                 for f in [r for r in rows if r["arm"] == "fixed" and r["seed"] == s] if e["best"] > f["best"])
    summary = (f"{len(seeds)} seeds, {calls_text}): the model wrote {valid} valid template{'s' * (valid != 1)} in "
               f"{proposed} tries")
    per_seed = [(sum(_templates(r)[1] for r in evolve if r["seed"] == s),
                 sum(_templates(r)[0] for r in evolve if r["seed"] == s)) for s in seeds]
    if proposed:
        share = bootstrap_interval(per_seed, lambda rows: float(rows[:, 0].sum() / max(rows[:, 1].sum(), 1)))
        summary += f" (valid share {share.text(fmt='{:.0%}')})"
    summary += (", so it does not help at that size" if valid == 0 else
                f"; the evolve arm's best child beat the fixed arm's on {better} of {len(seeds)} seeds")
    return {"table": "\n".join(lines), "summary": summary}
