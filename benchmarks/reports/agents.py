"""Tables, claims and plot of the Darwin Gödel agents benchmark (``benchmarks/bench_agents.py``)
from ``benchmarks/results/agents.json`` (and the earlier runs ``agents-40.json``, ``agents-20.json``).

A claim "arm a beats b on held-out tasks" is the paired difference over seeds of the final
agents' held-out figures with its 90 % two-stage bootstrap interval (seeds, then each seed's
salted re-scorings; ``qdevolve.agents.interval.paired_difference``), judged by ``_raw.verdict``:
**holds** only when the interval lies above 0."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _raw import Interval, verdict  # noqa: E402

from qdevolve.agents.interval import paired_difference  # noqa: E402

RAW_NAMES = ("agents-40", "agents-20")
LABELS = {"dgm": "archive (`dgm` selection)", "greedy": "greedy ablation (latest best)", "hgm": "`hgm` selection"}
PNG = "docs/bench_agents.png"


def _ms(xs: list[float]) -> str:
    sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
    return f"{statistics.fmean(xs):.4f} ± {sd:.4f}"


def _arms(raw: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in raw["runs"]:
        out.setdefault(r["arm"], []).append(r)
    return out


def _seed_draws(raw: dict[str, Any], seed: int) -> list[float]:
    r = next(r for r in raw["runs"] if r["seed"] == seed)
    return list(r.get("seed_draws") or [r["seed_final"]])


def _at(curve: list[list[Any]], n: int) -> float | None:
    value = None
    for k, _best, heldout in curve:
        if k > n:
            break
        value = heldout
    return value


def table(raw: dict[str, Any]) -> str:
    arms = _arms(raw)
    n = len({r["seed"] for r in raw["runs"]})
    best = max(arms, key=lambda a: statistics.fmean(r["final"] for r in arms[a]))
    lines = [f"| arm | held-out, final best agent (mean ± sd over {n} seeds) | seed agent | runs beating the seed "
             "agent | best agent's generation | parents expanded | wall s / run |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for a, rs in arms.items():
        final = _ms([r["final"] for r in rs])
        lines.append(f"| {LABELS.get(a, a)} | {f'**{final}**' if a == best else final} | "
                     f"{_ms([r['seed_final'] for r in rs])} | {sum(r['final'] > r['seed_final'] for r in rs)}/{len(rs)} | "
                     f"{statistics.fmean(r['best_generation'] for r in rs):.1f} | "
                     f"{statistics.fmean(r['parents'] for r in rs):.1f} | {statistics.fmean(r['wall_s'] for r in rs):.0f} |")
    return "\n".join(lines)


def curve(raw: dict[str, Any]) -> str:
    """The best-by-score agent's held-out figure against children evaluated, from the run's stored
    metrics (one scoring per agent: what selection saw), mean ± sd over seeds."""
    n_max = max(k for r in raw["runs"] for k, _b, _h in r["curve"])
    marks = sorted({0, *range(5, n_max + 1, 5), n_max})
    lines = ["| arm | " + " | ".join(f"n={n}" for n in marks) + " |", "|---|" + "---:|" * len(marks)]
    for a, rs in _arms(raw).items():
        cells = []
        for n in marks:
            vals = [v for r in rs for v in [_at(r["curve"], n)] if v is not None]
            cells.append(_ms(vals) if vals else "-")
        lines.append(f"| {a} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _claim(what: str, a: dict[int, list[float]], b: dict[int, list[float]]) -> str:
    keys = sorted(set(a) & set(b))
    d = paired_difference([(a[k], b[k]) for k in keys])
    iv = Interval(d.estimate, d.lo, d.hi, d.level, len(keys))
    word = verdict(iv, 0.0, "greater")
    span = "no interval" if not iv.has_interval else f"90 % interval [{d.lo:+.4f}, {d.hi:+.4f}]"
    noise = "" if not iv.has_interval else ", within noise" if d.lo <= 0 <= d.hi else ", beyond noise"
    means = " vs ".join(f"{statistics.fmean(statistics.fmean(x[k]) for k in keys):.4f}" for x in (a, b))
    return f"- {what}: **{word}** ({means}; difference {d.estimate:+.4f}, {span} over {len(keys)} seeds{noise})"


def claims(raw: dict[str, Any]) -> str:
    arms = _arms(raw)
    draws = {a: {r["seed"]: list(r.get("final_draws") or [r["final"]]) for r in rs} for a, rs in arms.items()}
    seed_agent = {s: _seed_draws(raw, s) for s in {r["seed"] for r in raw["runs"]}}
    lines = []
    if "dgm" in draws:
        lines.append(_claim("the archive (`dgm`) finds an agent that beats the seed agent on held-out tasks",
                            draws["dgm"], seed_agent))
        if "greedy" in draws:
            lines.append(_claim("the archive beats the greedy ablation", draws["dgm"], draws["greedy"]))
    return "\n".join(lines)


def measured(raw: dict[str, Any]) -> str:
    parts = []
    for a, rs in _arms(raw).items():
        parts.append(f"{a}: best agent {statistics.fmean(r['best_generation'] for r in rs):.1f} self-edits from the "
                     f"seed, {statistics.fmean(r['parents'] for r in rs):.1f} parents expanded, "
                     f"{statistics.fmean(r['failed'] for r in rs):.1f} failed children, final held-out sd "
                     f"{statistics.stdev([r['final'] for r in rs]) if len(rs) > 1 else 0.0:.4f}")
    draws = [v for s in sorted({r["seed"] for r in raw["runs"]}) for v in _seed_draws(raw, s)]
    if len(draws) > 1:
        parts.append(f"seed agent: held-out sd {statistics.stdev(draws):.4f} over {len(draws)} salted scorings")
    return "Measured: " + "; ".join(parts) + "."


def render(raw: dict[str, Any]) -> dict[str, str]:
    return {"table": table(raw), "curve": curve(raw), "claims": claims(raw), "measured": measured(raw)}


def plots(raw: dict[str, Any]) -> dict[str, dict[str, Any]]:
    if "arms" not in raw:  # the earlier runs (agents-40, agents-20) have no plot of their own
        return {}
    iterations = int(raw["iterations"])
    series = {}
    for a, rs in _arms(raw).items():
        ys = []
        for n in range(iterations + 1):
            vals = [v for r in rs for v in [_at(r["curve"], n)] if v is not None]
            ys.append(statistics.fmean(vals) if vals else None)
        series[a] = ys
    seed = statistics.fmean(float(v) for v in raw["seed_final"].values())
    return {PNG: {"iterations": iterations, "arms": series, "seed_agent": seed}}


def draw(png: Path, data: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    xs = list(range(data["iterations"] + 1))
    for a, ys in data["arms"].items():
        ax.plot(xs, [float("nan") if y is None else y for y in ys], label=f"{a} (best agent)")
    ax.axhline(data["seed_agent"], color="grey", linestyle="--", label="seed agent (re-scored)")
    ax.set_xlabel("child agents evaluated")
    ax.set_ylabel("held-out normalised improvement")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)
