"""The outer loop (``benchmarks/bench_loop.py``) from ``benchmarks/results/loop.json``.

``table``: the controller's cost and the evaluation rate, one line per measurement over the
repeats. The result is the median over repeats with its 90 % percentile-bootstrap interval over
the repeats (``_raw.bootstrap_interval``; with 3 repeats it spans their min and max):

- controller CPU ms per evaluation = 1000 x CPU seconds of the run / evaluations, with the
  in-process null sandbox (nothing is executed: the cost of archive, selection, mutator and
  store);
- evaluations/s = evaluations / wall seconds of a run of the trivial evaluator through the real
  sandbox, at 1 and 2 workers; the speed-up of 2 over 1 workers is the ratio of the two rates
  of the same repeat (run back to back), summarised over the repeats the same way.

``circle_packing``: per archive, the best score's mean over run seeds with its 90 % bootstrap
interval over the seeds, the best score of each seed, and the means of the QD-score (sum of the
elites' scores, offset 0) and of the coverage.

Each goal the raw file records (controller CPU <= 5 ms per evaluation; 2 workers faster than
1; the best score above the seed program's, per seed: best - seed score > 0) is judged by rule
(``reports/_goals.py``): **holds** when the estimate (median over repeats, mean over seeds) and
the whole interval meet it, **holds in the mean** when only the estimate does, **does not
hold** otherwise.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _goals import goal_text, interval, judge, span  # noqa: E402


def _goal_cells(goals: list[dict[str, Any]], values: list[float], **kw: Any) -> tuple[str, str]:
    if not goals:
        return "-", "-"
    iv = interval(values, **kw)
    return "; ".join(goal_text(g) for g in goals), "; ".join(judge(iv, g) for g in goals)


def _load(rows: list[dict[str, Any]]) -> str:
    loads = [r["loadavg"] for r in rows if r.get("loadavg") is not None]
    if not loads:
        return "-"
    return f"{min(loads):.1f}" + (f" to {max(loads):.1f}" if max(loads) != min(loads) else "")


def _evals(rows: list[dict[str, Any]]) -> str:
    lo, hi = min(r["evaluations"] for r in rows), max(r["evaluations"] for r in rows)
    return f"{lo:,}" if lo == hi else f"{lo:,}-{hi:,}"


def _rate(r: dict[str, Any]) -> float:
    return r["evaluations"] / r["wall_s"]


def table(raw: dict[str, Any]) -> str:
    lines = ["| measurement | result: median (90 % interval over repeats) | also: median | goal | verdict | "
             "load (1 min) |", "|---|---|---|---|---|---|"]
    ctl = raw.get("controller") or []
    if ctl:
        cpu = [1000 * r["cpu_s"] / max(r["evaluations"], 1) for r in ctl]
        wall = statistics.median(1000 * r["wall_s"] / max(r["evaluations"], 1) for r in ctl)
        goal, verdict = _goal_cells(ctl[0].get("goals") or [], cpu)
        lines.append(f"| controller CPU per evaluation, in-process null sandbox ({_evals(ctl)} evaluations) | "
                     f"{span(interval(cpu), '{:.2f}', 'ms')} | {wall:.2f} ms wall | {goal} | {verdict} | "
                     f"{_load(ctl)} |")
    tp = raw.get("throughput") or []
    by_w: dict[int, dict[int, dict[str, Any]]] = {}
    for r in tp:
        by_w.setdefault(r["workers"], {})[r["repeat"]] = r
    for w in sorted(by_w):
        rows = list(by_w[w].values())
        sandbox = "/".join(sorted({r["sandbox"] for r in rows}))
        ctl_ms = statistics.median(1000 * r["cpu_s"] / max(r["evaluations"], 1) for r in rows)
        lines.append(f"| trivial evaluator through the {sandbox} sandbox, {w} worker{'s' * (w != 1)} "
                     f"({_evals(rows)} evaluations) | {span(interval([_rate(r) for r in rows]), '{:.1f}', 'evals/s')} "
                     f"| {ctl_ms:.2f} ms controller CPU / eval | - | - | {_load(rows)} |")
    if 1 in by_w:
        for w in sorted(by_w):
            goals = next(iter(by_w[w].values())).get("goals") or []
            pairs = sorted(set(by_w[1]) & set(by_w[w]))
            if w == 1 or not pairs:
                continue
            ratios = [_rate(by_w[w][k]) / _rate(by_w[1][k]) for k in pairs]
            goal, verdict = _goal_cells(goals, ratios)
            lines.append(f"| speed-up of {w} over 1 worker (rates of the same repeat) | "
                         f"{span(interval(ratios), '{:.2f}x')} | - | {goal} | {verdict} | "
                         f"{_load([by_w[w][k] for k in pairs])} |")
    return "\n".join(lines) if len(lines) > 2 else "(not measured in this raw file)"


def circle_packing(raw: dict[str, Any]) -> str:
    rows = raw.get("circle_packing") or []
    if not rows:
        return "(not measured in this raw file)"
    n = (raw.get("settings") or {}).get("circle_packing_evaluations")
    lines = ["| archive | seeds | best: mean (90 % interval over seeds) | best per seed | seed score | QD-score: mean "
             "| coverage: mean | goal | verdict |", "|---|---|---|---|---|---|---|---|---|"]
    for name in dict.fromkeys(r["archive"] for r in rows):
        rs = sorted((r for r in rows if r["archive"] == name), key=lambda r: r["seed"])
        best = [r["best"] for r in rs]
        gains = [r["best"] - r["seed_score"] for r in rs]
        qd = statistics.fmean(r["qd_score"] or 0.0 for r in rs)
        cov = [r["coverage"] for r in rs if isinstance(r.get("coverage"), (int, float))]
        seed_scores = sorted({f"{r['seed_score']:.4f}" for r in rs})
        goals = rs[0].get("goals") or []
        goal = "; ".join("best > seed score" if g.get("metric") == "best_minus_seed_score" else goal_text(g)
                         for g in goals) or "-"
        verdict = "; ".join(judge(interval(gains, np.mean), g) for g in goals) or "-"
        lines.append(f"| {name} | {', '.join(str(r['seed']) for r in rs)} | "
                     f"{span(interval(best, np.mean), '{:.4f}', units='seed')} | {', '.join(f'{b:.4f}' for b in best)} | "
                     f"{', '.join(seed_scores)} | {qd:.2f} | {f'{100 * statistics.fmean(cov):.1f} %' if cov else 'n/a'} | "
                     f"{goal} | {verdict} |")
    if n:
        lines[0] = lines[0].replace("| archive |", f"| archive ({n:,} evaluations) |", 1)
    return "\n".join(lines)


def render(raw: dict[str, Any]) -> dict[str, str]:
    return {"table": table(raw), "circle_packing": circle_packing(raw)}
