"""Tables, claims and plot of the problem suite (``benchmarks/bench_suite.py``) from
``benchmarks/results/suite.json`` and its two design-change runs (``suite_lr3e-4.json``,
``suite_beta0.1.json``), with ``suite_report.py``'s own table code.

Claims are judged per seed, paired by seed, by the 90 % bootstrap interval over seeds
(``_raw.bootstrap_interval`` and ``_raw.verdict``): e.g. "the best trained arm solves >= 1.3x
the frozen base's targets" is the mean over seeds of solved(arm) / solved(frozen) against 1.3.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import suite_report as sr  # noqa: E402
from _raw import bootstrap_interval, verdict  # noqa: E402

RAW_NAMES = ("suite_lr3e-4", "suite_beta0.1")
PNG = "benchmarks/results/suite.png"


def _tables(raw: dict[str, Any]) -> dict[str, str]:
    arms = sr._by_arm(raw)
    cps = raw["checkpoints"]
    curve = ["| arm | " + " | ".join(str(c) for c in cps) + " |", "|---|" + "---|" * len(cps)]
    for a, rs in arms.items():
        cells = [sr._ms([r["curves"]["solved"][i] for r in rs if i < len(r["curves"]["solved"])], "{:.1f}")
                 for i in range(len(cps))]
        curve.append(f"| {a} | " + " | ".join(cells) + " |")
    end = ["| arm | solved | top-50 mean | classes / solved | held-out pass@1 | held-out pass@8 | "
           "held-out solved | step s | evals/s |", "|---|---|---|---|---|---|---|---|---|"]
    for a, rs in arms.items():
        steps = [s for r in rs for s in r["step_seconds"]]
        eps = [r["evaluations"] / max(r["wall_s"], 1e-9) for r in rs]
        end.append(f"| {a} | {sr._ms([sr._final(r, 'solved') for r in rs], '{:.1f}')} | "
                   f"{sr._ms([sr._final(r, 'top50') for r in rs], '{:.3f}')} | "
                   f"{sr._ms([sr._final(r, 'classes_per_solved') for r in rs])} | "
                   f"{sr._ms([sr._heldout(r, 'pass@1') for r in rs], '{:.3f}')} | "
                   f"{sr._ms([sr._heldout(r, 'pass@8') for r in rs], '{:.3f}')} | "
                   f"{sr._ms([r['heldout_solved'] for r in rs], '{:.1f}')} | "
                   f"{statistics.fmean(steps) if steps else 0.0:.3f} | {statistics.fmean(eps):.0f} |")
    return {"curve": "\n".join(curve), "end": "\n".join(end)}


def _per_seed(rs: list[dict[str, Any]], f: Any) -> dict[int, float]:
    return {r["seed"]: float(f(r)) for r in rs}


def claims(raw: dict[str, Any]) -> str:
    """The four claims of the suite, each a per-seed statistic judged by its interval over seeds."""
    arms = sr._by_arm(raw)
    solved = {a: _per_seed(rs, lambda r: sr._final(r, "solved")) for a, rs in arms.items()}
    classes = {a: _per_seed(rs, lambda r: sr._final(r, "classes_per_solved")) for a, rs in arms.items()}
    held = {a: _per_seed(rs, lambda r: r["heldout_solved"]) for a, rs in arms.items()}
    trained = [a for a in arms if a != "frozen base"]
    mean = lambda d: statistics.fmean(d.values())  # noqa: E731
    rows: list[tuple[str, str, list[float], float, str]] = []

    def paired(x: dict[int, float], y: dict[int, float], op: Any) -> list[float]:
        return [op(x[s], y[s]) for s in sorted(set(x) & set(y))]

    base = solved.get("frozen base")
    if base and trained:
        best = max(trained, key=lambda a: mean(solved[a]))
        rows.append(("1. best trained arm solves >= 1.3x the frozen base's targets", f"solved({best}) / solved(frozen)",
                     paired(solved[best], base, lambda a, b: a / b if b else float("inf")), 1.3, "greater"))
    if "grpo" in arms:
        div = [a for a in sr.DIVERSE if a in arms]
        if div:
            best = max(div, key=lambda a: mean(solved[a]))
            rows.append(("2. a diversity arm ends above GRPO", f"solved({best}) - solved(grpo)",
                         paired(solved[best], solved["grpo"], lambda a, b: a - b), 0.0, "greater"))
            for a in div:
                rows.append((f"3. {a} keeps >= 1.5x GRPO's semantic classes per solved target",
                             f"classes({a}) / classes(grpo)",
                             paired(classes[a], classes["grpo"], lambda x, y: x / y if y else float("inf")), 1.5,
                             "greater"))
    if base and trained:
        best = max(trained, key=lambda a: mean(held[a]))
        rows.append(("4. the trained policy solves more held-out targets than the frozen one",
                     f"held-out solved({best}) - held-out solved(frozen)",
                     paired(held[best], held["frozen base"], lambda a, b: a - b), 0.0, "greater"))
    lines = ["| claim | per-seed statistic | mean over seeds (90 % bootstrap interval) | verdict |", "|---|---|---|---|"]
    for what, stat, values, null, direction in rows:
        iv = bootstrap_interval(values)
        fmt = "{:+.2f}" if null == 0 else "{:.2f}"
        lines.append(f"| {what} | {stat} vs {null:g} | {iv.text(fmt)} | {verdict(iv, null, direction)} |")
    return "\n".join(lines)


def changes(raw: dict[str, Any]) -> str:
    """One design-change run (seeds 0 and 1): per arm solved, held-out solved, held-out pass@8, classes."""
    arms = sr._by_arm(raw)
    lines = ["| arm | solved | held-out solved | held-out pass@8 | classes / solved |", "|---|---|---|---|---|"]
    for a, rs in arms.items():
        lines.append(f"| {a} | {sr._ms([sr._final(r, 'solved') for r in rs], '{:.1f}')} | "
                     f"{sr._ms([r['heldout_solved'] for r in rs], '{:.1f}')} | "
                     f"{statistics.fmean(sr._heldout(r, 'pass@8') for r in rs):.3f} | "
                     f"{statistics.fmean(sr._final(r, 'classes_per_solved') for r in rs):.2f} |")
    return "\n".join(lines)


def render(raw: dict[str, Any]) -> dict[str, str]:
    if "beta" in raw["args"] or raw["args"].get("lr") != 0.001:
        return {"changes": changes(raw)}
    return {**_tables(raw), "claims": claims(raw), "changes": changes(raw)}


def plots(raw: dict[str, Any]) -> dict[str, dict[str, Any]]:
    if "beta" in raw["args"] or raw["args"].get("lr") != 0.001:
        return {}
    series = {}
    for a, rs in sr._by_arm(raw).items():
        n = min(len(r["curves"]["solved"]) for r in rs)
        series[a] = {"samples": [rs[0]["curves"]["samples"][i] for i in range(n)],
                     "solved_mean": [statistics.fmean(r["curves"]["solved"][i] for r in rs) for i in range(n)]}
    return {PNG: {"arms": series, "ylabel": "training targets solved (mean over seeds)"}}


def draw(png: Path, data: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for a, s in data["arms"].items():
        ax.plot(s["samples"], s["solved_mean"], marker="o", ms=3, label=a, ls="--" if a == "frozen base" else "-")
    ax.set_xlabel("samples")
    ax.set_ylabel(data["ylabel"])
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)
