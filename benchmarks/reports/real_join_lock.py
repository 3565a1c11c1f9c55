"""Wall time of a joined real-model run with the backend lock exclusive vs shared
(``benchmarks/results/real_join_lock.json``).

The raw file holds two ``bench_real_join.py`` raw files of the same arms, seed and budget, run
as two processes at the same time on the same cores (so both see the same load): ``before``
at a commit whose joined backend let one generation run at a time, ``after`` at one whose
generations share the lock (two jobs' requests join one batch of the in-process backend's
coalescer). Per arm: ``ratio = wall(after) / wall(before)``. One pair per arm gives no
interval, and the table says so; it is a single measurement, not a verdict.
"""

from __future__ import annotations

from typing import Any

__all__ = ["render"]


def _runs(part: dict[str, Any]) -> dict[tuple[str, int], dict[str, Any]]:
    return {(r["arm"], r["seed"]): r for r in part["runs"]}


def render(raw: dict[str, Any]) -> dict[str, str]:
    before, after = _runs(raw["before"]), _runs(raw["after"])
    rows = ["| arm | seed | model calls | trainer steps | wall, " + raw["before"]["label"] + " | wall, "
            + raw["after"]["label"] + " | after / before | best score (before; after) |",
            "|---|---|---|---|---|---|---|---|"]
    ratios = []
    for key in sorted(set(before) & set(after)):
        b, a = before[key], after[key]
        ratio = a["wall_s"] / b["wall_s"]
        ratios.append(ratio)
        rows.append(f"| {key[0]} | {key[1]} | {a['calls']} | {a['steps']} | {b['wall_s']:.0f} s | {a['wall_s']:.0f} s "
                    f"| {ratio:.2f}x | {b['best_score']:.4f}; {a['best_score']:.4f} |")
    if not ratios:
        return {"table": "No arm was run at both commits.", "summary": "not measured"}
    faster = sum(r < 1 for r in ratios)
    summary = (f"with the lock shared, {faster} of {len(ratios)} runs took less wall time "
               f"({', '.join(f'{r:.2f}x' for r in ratios)}; one pair per arm and seed, measured side by side, "
               "so no interval)")
    return {"table": "\n".join(rows), "summary": summary}
