"""The lineage store (``benchmarks/bench_store.py``) from ``benchmarks/results/store.json``.

A row of the raw file is one measurement of one repeat; the rows of the same measurement
(backend, kind, size, format or command) over the repeats make one line of a table:

- result: the median over repeats of the measurement's figure with its 90 % percentile-bootstrap
  interval over the repeats (``_raw.bootstrap_interval``; with 3 repeats it spans their min
  and max). The figure is programs/s (= programs / wall seconds of the batched inserts) for
  the insert, milliseconds for the ancestry walk (a repeat's figure: the median of its timed
  calls) and wall seconds otherwise;
- CPU: the median over repeats of the same figure in CPU time of the measuring process
  (programs per CPU-second for the insert; for a ``qdevolve`` process, the CPU time of that
  process), the steadier figure on a shared machine;
- goal and verdict: each goal the raw file records for the row (issue 2 for the in-process
  SQLite figures, issue 14 for the inspection commands) judged by rule
  (``reports/_goals.py``): **holds** when the median and the whole interval meet the goal,
  **holds in the mean** when only the median does, **does not hold** otherwise; a goal stated
  for another size than the one measured is "not judged". Wall-time goals are judged on wall
  time;
- notes: counts and sizes (medians over repeats), peak RSS, and the 1-minute load average
  (min to max over the repeats' rows).

Keys: ``table`` (in-process measurements and the small ``lineage tree`` process) and
``inspect`` (the inspection commands of issue 14 as real processes).
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _goals import NOT_JUDGED, applies, goal_text, interval, judge, span  # noqa: E402


def _wall(r: dict[str, Any]) -> float:
    return statistics.median(r["call_wall_s"]) if "call_wall_s" in r else r["wall_s"]


def _cpu(r: dict[str, Any]) -> float:
    return statistics.median(r["call_cpu_s"]) if "call_cpu_s" in r else r["cpu_s"]


# metric -> (value of one row, number format, unit)
METRICS: dict[str, tuple[Callable[[dict[str, Any]], float], str, str]] = {
    "programs_per_s": (lambda r: r["programs"] / _wall(r), "{:,.0f}", "programs/s"),
    "wall_ms": (lambda r: 1000 * _wall(r), "{:.1f}", "ms"),
    "wall_s": (_wall, "{:.2f}", "s"),
    "peak_rss_mb": (lambda r: r["peak_rss_mb"], "{:.0f}", "MB"),
}
HEADLINE = {"insert": "programs_per_s", "ancestry": "wall_ms"}  # else wall_s
KEY = ("backend", "kind", "format", "command", "programs", "depth", "batch", "top")


def _label(r: dict[str, Any], calls: int | None) -> str:
    kind = r["kind"]
    if kind == "insert":
        text = f"insert {r['programs']:,} programs + edges + evaluations (batches of {r['batch']:,})"
    elif kind == "ancestry":
        text = f"ancestry of a {r['depth']:,}-deep chain (recursive CTE; per repeat the median of {calls} calls)"
    elif kind == "graph":
        text = f"networkx DiGraph of the {r['programs']:,}-program run"
    elif kind == "export":
        text = f"export {r['format']} of the {r['programs']:,}-program run"
    elif kind == "tree_process":
        text = (f"`qdevolve lineage tree --depth {r['depth']} --top {r['top']}` on the {r['programs']:,}-program "
                "run (process)")
    elif kind == "inspect":
        text = f"`qdevolve {r['command']}` on a {r['programs']:,}-program run (process)"
    else:
        text = kind
    return ("PostgreSQL: " if r["backend"] == "postgresql" else "") + text


def _med(rows: list[dict[str, Any]], f: Callable[[dict[str, Any]], float]) -> float:
    return statistics.median(f(r) for r in rows)


def _cpu_cell(kind: str, rows: list[dict[str, Any]]) -> str:
    if not all("cpu_s" in r or "call_cpu_s" in r for r in rows):
        return "-"
    if kind == "insert":
        return f"{_med(rows, lambda r: r['programs'] / _cpu(r)):,.0f} programs/CPU-s"
    if kind == "ancestry":
        return f"{_med(rows, lambda r: 1000 * _cpu(r)):.1f} ms"
    return f"{_med(rows, _cpu):.2f} s"


def _notes(kind: str, rows: list[dict[str, Any]]) -> str:
    r0, notes = rows[0], []
    if kind == "graph":
        notes.append(f"{_med(rows, lambda r: r['nodes']):,.0f} nodes, {_med(rows, lambda r: r['edges']):,.0f} edges")
    if "bytes" in r0:
        notes.append(f"{_med(rows, lambda r: r['bytes']) / 1e6:.1f} MB written")
    if "peak_rss_mb" in r0:
        fn, fmt, unit = METRICS["peak_rss_mb"]
        notes.append(f"peak RSS {span(interval([fn(r) for r in rows]), fmt, unit)}")
    if "lines" in r0:
        lines = _med(rows, lambda r: r["lines"])
        notes.append(f"{lines:,.0f} line{'s' * (lines != 1)} printed")
    if "replayed" in r0:
        notes.append(f"snapshot + {r0['replayed']:,} evaluations replayed")
    loads = [r["loadavg"] for r in rows if r.get("loadavg") is not None]
    if loads:
        notes.append(f"load {min(loads):.1f}" + (f" to {max(loads):.1f}" if max(loads) != min(loads) else ""))
    return "; ".join(notes)


def _sizes(sizes: dict[str, Any]) -> str:
    def one(k: str, v: Any) -> str:
        v = f"{v:,}" if isinstance(v, int) else str(v)
        return f"{v} programs" if k == "programs" else f"{k} {v}"
    return ", ".join(one(k, v) for k, v in sizes.items())


def _verdict(rows: list[dict[str, Any]]) -> tuple[str, str]:
    """The goal cell and the verdict cell of one measurement."""
    goals = rows[0].get("goals") or []
    if not goals:
        return "-", "-"
    verdicts = []
    for g in goals:
        if not applies(g, rows[0]):
            measured = {k: rows[0].get(k) for k in g["applies_to"]}
            verdicts.append(f"{NOT_JUDGED} (goal for {_sizes(g['applies_to'])}, measured {_sizes(measured)})")
            continue
        fn = METRICS[g["metric"]][0]
        verdicts.append(judge(interval([fn(r) for r in rows]), g))
    if len(goals) == 1 or (len(set(verdicts)) == 1 and verdicts[0].startswith(NOT_JUDGED)):
        return "; ".join(goal_text(g) for g in goals), verdicts[0]
    return ("; ".join(goal_text(g) for g in goals),
            "; ".join(f"{goal_text(g)}: {v}" for g, v in zip(goals, verdicts, strict=True)))


def groups(raw: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """The rows of each measurement, in the order of first appearance."""
    out: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in raw["rows"]:
        out.setdefault(tuple(r.get(k) for k in KEY), []).append(r)
    return list(out.values())


def table(raw: dict[str, Any], kinds: set[str] | None = None, exclude: set[str] | None = None) -> str:
    calls = (raw.get("settings") or {}).get("ancestry_calls")
    lines = ["| measurement | result: median (90 % interval over repeats) | CPU: median | goal | verdict | notes |",
             "|---|---|---|---|---|---|"]
    for rows in groups(raw):
        kind = rows[0]["kind"]
        if (kinds is not None and kind not in kinds) or (exclude and kind in exclude):
            continue
        fn, fmt, unit = METRICS[HEADLINE.get(kind, "wall_s")]
        goal, verdict = _verdict(rows)
        lines.append(f"| {_label(rows[0], calls)} | {span(interval([fn(r) for r in rows]), fmt, unit)} | "
                     f"{_cpu_cell(kind, rows)} | {goal} | {verdict} | {_notes(kind, rows)} |")
    return "\n".join(lines) if len(lines) > 2 else "(not measured in this raw file)"


def render(raw: dict[str, Any]) -> dict[str, str]:
    return {"table": table(raw, exclude={"inspect"}), "inspect": table(raw, kinds={"inspect"})}
