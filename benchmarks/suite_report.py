"""Tables, claims and the solved-vs-samples plot of ``benchmarks/bench_suite.py``."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any

DIVERSE = ("ips", "rare", "vpo", "passk")  # the diversity-preserving arms


def _ms(xs: list[float], fmt: str = "{:.2f}") -> str:
    if not xs:
        return "-"
    sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
    return f"{fmt.format(statistics.fmean(xs))} ± {fmt.format(sd)}"


def _by_arm(report: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in report["runs"]:
        if not r.get("error"):
            out.setdefault(r["arm"], []).append(r)
    return {a: out[a] for a in report["arms"] if a in out}


def _final(r: dict[str, Any], key: str) -> float:
    return float(r["curves"][key][-1])


def _heldout(r: dict[str, Any], k: str) -> float:
    return statistics.fmean(v[k] for v in r["heldout_pass"].values())


def _slope(r: dict[str, Any]) -> float:
    """Targets solved per 1,000 samples over the last third of the run."""
    xs, ys = r["curves"]["samples"], r["curves"]["solved"]
    i = max(0, len(xs) - 1 - max(1, len(xs) // 3))
    return 1000.0 * (ys[-1] - ys[i]) / max(1.0, xs[-1] - xs[i])


def render(report: dict[str, Any], png: Path | None = None) -> str:
    arms = _by_arm(report)
    cps = report["checkpoints"]
    lines = [f"Command: `{report.get('command', 'python benchmarks/bench_suite.py')}`; date {report['date']}; "
             f"load {', '.join(f'{x:.1f}' for x in report.get('load_start', []))} at start, "
             f"{', '.join(f'{x:.1f}' for x in report.get('load_end', []))} at the end; wall {report['wall_s']:.0f} s "
             f"(bases: {report.get('base_build_s', 0):.0f} s); seeds {report['seeds']}; "
             f"{report['args']['samples']} samples per run.", ""]
    lines += ["**Targets solved against samples** (mean ± sd over seeds):", "",
              "| arm | " + " | ".join(str(c) for c in cps) + " |", "|---|" + "---|" * len(cps)]
    for a, rs in arms.items():
        cells = [_ms([r["curves"]["solved"][i] for r in rs if i < len(r["curves"]["solved"])], "{:.1f}")
                 for i in range(len(cps))]
        lines.append(f"| {a} | " + " | ".join(cells) + " |")
    lines += ["", "**At the end** (training targets; held-out targets after training):", "",
              "| arm | solved | top-50 mean | classes / solved | held-out pass@1 | held-out pass@8 | "
              "held-out solved | step s | evals/s |", "|---|---|---|---|---|---|---|---|---|"]
    for a, rs in arms.items():
        steps = [s for r in rs for s in r["step_seconds"]]
        eps = [r["evaluations"] / max(r["wall_s"], 1e-9) for r in rs]
        lines.append(f"| {a} | {_ms([_final(r, 'solved') for r in rs], '{:.1f}')} | "
                     f"{_ms([_final(r, 'top50') for r in rs], '{:.3f}')} | "
                     f"{_ms([_final(r, 'classes_per_solved') for r in rs])} | "
                     f"{_ms([_heldout(r, 'pass@1') for r in rs], '{:.3f}')} | "
                     f"{_ms([_heldout(r, 'pass@8') for r in rs], '{:.3f}')} | "
                     f"{_ms([r['heldout_solved'] for r in rs], '{:.1f}')} | "
                     f"{statistics.fmean(steps) if steps else 0.0:.3f} | {statistics.fmean(eps):.0f} |")
    # the claims judged by their bootstrap interval over seeds, as BENCHMARKS.md renders them
    sys.path.insert(0, str(Path(__file__).resolve().parent / "reports"))
    from suite import claims  # noqa: PLC0415 (reports/suite.py imports this module)

    lines += ["", "**Claims** (90 % bootstrap interval over seeds; holds only when it excludes the null):", "",
              claims(report)]
    if png is not None and arms:
        _plot(arms, cps, png)
        lines += ["", f"![targets solved against samples]({png.name})"]
    return "\n".join(lines) + "\n"


def _plot(arms: dict[str, list[dict[str, Any]]], cps: list[int], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for a, rs in arms.items():
        n = min(len(r["curves"]["solved"]) for r in rs)
        xs = [rs[0]["curves"]["samples"][i] for i in range(n)]
        ys = [statistics.fmean(r["curves"]["solved"][i] for r in rs) for i in range(n)]
        ax.plot(xs, ys, marker="o", ms=3, label=a, ls="--" if a == "frozen base" else "-")
    ax.set_xlabel("samples")
    ax.set_ylabel("training targets solved (mean over seeds)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)
