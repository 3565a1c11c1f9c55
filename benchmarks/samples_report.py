"""Curves, tables and the plot of ``bench_samples.py`` (quality against model calls).

A run's records are ``(call, score)`` pairs (the seed is call 0; a program whose evaluation
raised has no score and is skipped). At each call budget c = 0..N a run has a best score
(the largest score among programs from calls <= c) and a top-10 mean (the mean of the 10
largest such scores; of all of them while fewer than 10 exist). A framework's curve is the
median over its seeds at each c. "Calls to reach T" is the first c where a median curve is
>= T (``None``: not within N calls).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from statistics import median

__all__ = ["curves", "calls_to_reach", "read_records", "report_lines", "plot"]


def read_records(path: Path) -> list[tuple[int, float]]:
    out = []
    if path.exists():
        for line in path.read_text().splitlines():
            r = json.loads(line)
            if isinstance(r.get("score"), (int, float)) and math.isfinite(r["score"]):
                out.append((int(r["call"]), float(r["score"])))
    return out


def curves(records: list[tuple[int, float]], n_calls: int) -> tuple[list[float], list[float]]:
    """(best, top-10 mean) at every call budget 0..n_calls."""
    by_call: dict[int, list[float]] = {}
    for call, score in records:
        if call <= n_calls:
            by_call.setdefault(call, []).append(score)
    seen: list[float] = []
    best, top = [], []
    for c in range(n_calls + 1):
        seen.extend(by_call.get(c, []))
        seen.sort(reverse=True)
        del seen[10:]  # only the 10 best matter for both curves
        best.append(seen[0] if seen else math.nan)
        top.append(sum(seen) / len(seen) if seen else math.nan)
    return best, top


def median_curve(runs: list[list[float]]) -> list[float]:
    return [median(vals) if (vals := [r[c] for r in runs if not math.isnan(r[c])]) else math.nan
            for c in range(len(runs[0]))]


def calls_to_reach(curve: list[float], target: float) -> int | None:
    return next((c for c, v in enumerate(curve) if not math.isnan(v) and v >= target - 1e-12), None)


def report_lines(task: str, results: dict[str, list[list[tuple[int, float]]]], n_calls: int,
                 reference: str = "qdevolve") -> tuple[list[str], dict]:
    """Markdown lines for one task and a summary dict (medians, calls to reach, ratios)."""
    med, lines = {}, []
    for fw, runs in results.items():
        cs = [curves(r, n_calls) for r in runs]
        med[fw] = {"best": median_curve([c[0] for c in cs]), "top10": median_curve([c[1] for c in cs]),
                   "final_best": [c[0][-1] for c in cs], "final_top10": [c[1][-1] for c in cs]}
    marks = sorted({0, n_calls // 4, n_calls // 2, 3 * n_calls // 4, n_calls})
    lines += [f"### {task}", "", "Median over seeds of the best score (top-10 mean in brackets) after c calls; "
              "final best per seed.", "",
              "| framework | seeds | " + " | ".join(f"c = {c}" for c in marks) + " | final best per seed |",
              "|---|---|" + "---|" * (len(marks) + 1)]
    for fw, m in med.items():
        cells = [f"{m['best'][c]:.6g} ({m['top10'][c]:.6g})" for c in marks]
        per_seed = ", ".join(f"{v:.6g}" for v in m["final_best"])
        lines.append(f"| {fw} | {len(m['final_best'])} | " + " | ".join(cells) + f" | {per_seed} |")
    lines += ["", "Calls each framework's median curve needs to reach each framework's final median best "
              "(rows: who reaches; columns: whose target; '-': not within the budget):", "",
              "| reaches \\ target | " + " | ".join(f"{fw} ({med[fw]['best'][-1]:.6g})" for fw in med) + " |",
              "|---|" + "---|" * len(med)]
    reach = {a: {b: calls_to_reach(med[a]["best"], med[b]["best"][-1]) for b in med} for a in med}
    for a in med:
        lines.append(f"| {a} | " + " | ".join("-" if reach[a][b] is None else str(reach[a][b]) for b in med) + " |")
    ratios = {}
    if reference in med:
        for b in med:
            if b == reference:
                continue
            own, ours = reach[b][b], reach[reference][b]
            ratios[b] = None if ours is None or not own else ours / own
        lines += ["", "; ".join(
            f"{reference} reaches {b}'s final median best in "
            + ("- (not within the budget)" if r is None else f"{reach[reference][b]} calls = {r:.2f}x of {b}'s {reach[b][b]}")
            for b, r in ratios.items())]
    lines.append("")
    return lines, {"median": {fw: {"best": m["best"], "top10": m["top10"]} for fw, m in med.items()},
                   "final_best": {fw: m["final_best"] for fw, m in med.items()}, "reach": reach, "ratios": ratios}


def plot(summaries: dict[str, dict], results: dict[str, dict[str, list]], n_calls: int, out: Path) -> None:
    """Median curves per task and framework with their min-max band over seeds (``reports/_plots.py``)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent / "reports"))
    from _plots import draw_task_grid

    tasks: dict[str, dict[str, dict]] = {}
    for task in summaries:
        for fw, m in summaries[task]["median"].items():
            entry = {}
            for i, key in enumerate(("best", "top10")):
                runs = [curves(r, n_calls)[i] for r in results[task][fw]]
                entry[key] = {"median": list(m[key]), "lo": [min(r[c] for r in runs) for c in range(n_calls + 1)],
                              "hi": [max(r[c] for r in runs) for c in range(n_calls + 1)]}
            tasks.setdefault(task, {})[fw] = entry
    colors = {fw: {"qdevolve": "tab:blue", "openevolve": "tab:orange", "shinka": "tab:green"}.get(fw.split("+")[0], "")
              for t in tasks.values() for fw in t}
    draw_task_grid(out, tasks, list(range(n_calls + 1)), colors={k: v for k, v in colors.items() if v})
