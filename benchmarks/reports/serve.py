"""The web viewer (``benchmarks/bench_serve.py``) from ``benchmarks/results/serve.json``.

A row of the raw file is one measurement of one repeat (each repeat: a fresh ``qdevolve serve``
process and a fresh Chromium profile); the rows of one measurement over the repeats make one
line of the table:

- result: the median over repeats of the measurement's figure with its 90 % percentile-bootstrap
  interval over the repeats (``_goals.interval``; with 3 repeats it spans their min and max).
  The figure is wall seconds (milliseconds for the cached API calls); for a measurement taken
  several times within a repeat (later views, cached and filtered API calls) a repeat's figure
  is the median of its calls;
- CPU: medians over repeats (with their intervals) of the CPU seconds of the server process and
  of the browser's processes during the first view, and of the measuring process for the cold
  API call;
- goal and verdict: the goal the raw file records for the row (issue 15: first view <= 2 s for
  100,000 programs) judged by rule (``_goals.judge``): **holds** when the median and the whole
  interval meet it, **holds in the mean** when only the median does (or there is one repeat),
  **does not hold** otherwise; "not judged" when the run measured another size or the
  measurement has no value;
- notes: tree nodes drawn of the run's programs, repeats whose measurement failed (with the
  error), and the 1-minute load average (min to max over the repeats' rows).

A measurement the raw file lacks, or that failed in every repeat, is listed as not measured
with the reason, never left out.

Keys: ``table``; ``setup`` (one sentence: run size, repeats, database, Chromium); and figures
for prose: ``first_view``, ``verdict``, ``first_view_cpu``, ``api_cold``, ``server_start``,
``load``.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _goals import NOT_JUDGED, applies, goal_text, interval, judge, span  # noqa: E402

RAW_FILE = "benchmarks/results/serve.json"


def _calls_median(field: str) -> Callable[[dict[str, Any]], float]:
    return lambda r: statistics.median(r[field])


# kind -> (label, value of one row in the unit shown, number format, unit); the table's order
MEASUREMENTS: dict[str, tuple[str, Callable[[dict[str, Any]], float], str, str]] = {
    "first_view": ("first view of a fresh server (navigate to `/` -> lineage tree drawn)",
                   lambda r: r["wall_s"], "{:.2f}", "s"),
    "later_view": ("later views of the same page, new tab (per repeat the median of {views} views)",
                   _calls_median("view_wall_s"), "{:.2f}", "s"),
    "api_cached": ("tree API, lineage cached (per repeat the median of {calls} calls)",
                   lambda r: 1000 * statistics.median(r["call_wall_s"]), "{:.0f}", "ms"),
    "api_filtered": ("tree API with filters (status, generation window), cached (per repeat the median of "
                     "{calls} calls)", lambda r: 1000 * statistics.median(r["call_wall_s"]), "{:.0f}", "ms"),
    "api_cold": ("tree API, cold (in-process app without warm-up: the lineage read on the call)",
                 lambda r: r["wall_s"], "{:.2f}", "s"),
    "archive_page": ("archive page (navigate -> heatmap and curves drawn)", lambda r: r["wall_s"], "{:.2f}", "s"),
    "server_start": ("server start (process start -> URL printed, newest lineage read -> API answering)",
                     lambda r: r["wall_s"], "{:.2f}", "s"),
}
CPU_FIELDS = {"first_view": (("server", "server_cpu_s"), ("browser", "browser_cpu_s")),
              "api_cold": (("", "cpu_s"),)}


def _rows(raw: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [r for r in raw.get("rows") or [] if r.get("kind") == kind]


def _ok(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if not r.get("error")]


def _values(kind: str, rows: list[dict[str, Any]]) -> list[float]:
    return [MEASUREMENTS[kind][1](r) for r in _ok(rows)]


def _result(kind: str, rows: list[dict[str, Any]]) -> str:
    if not rows:
        return f"not measured: no `{kind}` rows in `{RAW_FILE}`"
    values = _values(kind, rows)
    if not values:
        return f"not measured: failed in all {len(rows)} repeats"
    _, _, fmt, unit = MEASUREMENTS[kind]
    return span(interval(values), fmt, unit)


def _cpu(kind: str, rows: list[dict[str, Any]]) -> str:
    ok = _ok(rows)
    parts = []
    for name, field in CPU_FIELDS.get(kind, ()):
        vals = [r[field] for r in ok if r.get(field) is not None]
        if vals:
            parts.append(f"{name} {span(interval(vals), '{:.2f}', 's')}".strip())
    return "; ".join(parts) or "-"


def _sizes(sizes: dict[str, Any]) -> str:
    return ", ".join(f"{v:,} programs" if k == "programs" and isinstance(v, int) else f"{k} {v}"
                     for k, v in sizes.items())


def _verdict(kind: str, rows: list[dict[str, Any]], goals: list[dict[str, Any]]) -> tuple[str, str]:
    """The goal cell and the verdict cell of one measurement."""
    if not goals:
        return "-", "-"
    values = _values(kind, rows)
    verdicts = []
    for g in goals:
        if not values:
            verdicts.append(f"{NOT_JUDGED} (not measured)")
        elif not applies(g, rows[0]):
            measured = {k: rows[0].get(k) for k in g["applies_to"]}
            verdicts.append(f"{NOT_JUDGED} (goal for {_sizes(g['applies_to'])}, measured {_sizes(measured)})")
        else:
            verdicts.append(judge(interval(values), g))
    if len(goals) == 1:
        return goal_text(goals[0]), verdicts[0]
    return ("; ".join(goal_text(g) for g in goals),
            "; ".join(f"{goal_text(g)}: {v}" for g, v in zip(goals, verdicts, strict=True)))


def _goals_of(raw: dict[str, Any], kind: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The row's own goals; for a measurement the raw file lacks, the goals recorded in its settings."""
    if rows:
        return rows[0].get("goals") or []
    return ((raw.get("settings") or {}).get("goals") or {}).get(kind, [])


def _load(rows: list[dict[str, Any]]) -> str | None:
    loads = [r["loadavg"] for r in rows if r.get("loadavg") is not None]
    if not loads:
        return None
    return f"{min(loads):.1f}" + (f" to {max(loads):.1f}" if round(max(loads), 1) != round(min(loads), 1) else "")


def _notes(kind: str, rows: list[dict[str, Any]]) -> str:
    notes, ok = [], _ok(rows)
    if kind == "first_view" and ok and "tree_nodes" in ok[0]:
        shown = statistics.median(r["tree_nodes"] for r in ok)
        total = statistics.median(r["tree_programs"] for r in ok)
        notes.append(f"{shown:,.0f} of {total:,.0f} programs drawn, the rest aggregated")
    failed = [r for r in rows if r.get("error")]
    if failed:
        notes.append("failed in repeat " + ", ".join(f"{r.get('repeat', '?')} ({r['error']})" for r in failed))
    if (load := _load(rows)) is not None:
        notes.append(f"load {load}")
    return "; ".join(notes)


def table(raw: dict[str, Any]) -> str:
    settings = raw.get("settings") or {}
    lines = ["| measurement | result: median (90 % interval over repeats) | CPU: median (90 % interval) | goal | "
             "verdict | notes |", "|---|---|---|---|---|---|"]
    for kind, (label, _, _, _) in MEASUREMENTS.items():
        rows = _rows(raw, kind)
        goal, verdict = _verdict(kind, rows, _goals_of(raw, kind, rows))
        label = label.format(views=settings.get("views", "?"), calls=settings.get("calls", "?"))
        lines.append(f"| {label} | {_result(kind, rows)} | {_cpu(kind, rows)} | {goal} | {verdict} | "
                     f"{_notes(kind, rows)} |")
    return "\n".join(lines)


def setup(raw: dict[str, Any]) -> str:
    s, meta = raw.get("settings") or {}, raw.get("meta") or {}
    if not s:
        return f"(no settings in `{RAW_FILE}`)"
    parts = [f"Synthetic run of {s['programs']:,} programs (`tests/serve/synth.py`, seed {s.get('seed', '?')})"]
    if s.get("database_bytes") is not None:
        parts[0] += (f", a {s['database_bytes'] / 1e6:.0f} MB SQLite database written in "
                     f"{s.get('database_written_s', float('nan')):.1f} s before the clock")
    parts.append(f"{s['repeats']} repeats, each a fresh `qdevolve serve` process and a fresh Chromium profile, "
                 f"{s.get('views', '?')} later views and {s.get('calls', '?')} calls of each cached tree API per repeat")
    parts.append(f"browser: {meta.get('chromium') or 'version not recorded'}, headless, over the DevTools pipe")
    return "; ".join(parts) + "."


def _figure(raw: dict[str, Any], kind: str) -> str:
    return _result(kind, _rows(raw, kind))


def render(raw: dict[str, Any]) -> dict[str, str]:
    fv = _rows(raw, "first_view")
    return {"table": table(raw), "setup": setup(raw),
            "first_view": _figure(raw, "first_view"),
            "verdict": _verdict("first_view", fv, _goals_of(raw, "first_view", fv))[1],
            "first_view_cpu": _cpu("first_view", fv),
            "api_cold": _figure(raw, "api_cold"),
            "server_start": _figure(raw, "server_start"),
            "load": _load(raw.get("rows") or []) or "not recorded"}
