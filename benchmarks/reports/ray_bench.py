"""The Ray executor benchmark (``benchmarks/bench_ray.py``) from ``benchmarks/results/ray.json``.

(The module is not called ``ray.py``: ``benchmarks/reports`` is on ``sys.path`` once a renderer is
loaded, and a ``ray`` module there would hide Ray itself.)

Each measurement is taken once per repeat; a line of a table is the median over the repeats of
the repeat's figure, with its 90 % percentile-bootstrap interval over the repeats
(``_goals.interval``; with 3 repeats it spans their min and max). A repeat's figure:

- overhead (``overhead``): the mean wall time per evaluation of the repeat's ``n`` sequential
  no-op evaluations (each timed from ``submit`` to its result); ray / local is the ratio of the
  two executors' means within the repeat;
- throughput (``throughput``): evaluations / wall seconds of the repeat's run at that many slots;
  the speed-up is that rate divided by the same repeat's 1-slot rate;
- controller CPU (``ceiling``): the controller process's CPU seconds over the ``n`` evaluations,
  divided by ``n``; its ceiling is 1 / that; the store's rate is transactions / wall seconds;
  "64 workers kept busy when an evaluation takes at least" is 64 / rate (per repeat, then the
  median and interval of those);
- policy (``policy``): the median request time of the repeat's requests, the actor / controller
  ratio of those medians, and the median of the repeat's version pushes.

Goals (the raw file's ``goals``, issue 14 item 9) are judged by rule (``_goals.judge``): **holds**
when the median and the whole interval meet the goal, **holds in the mean** when only the median
does (also with one repeat), **does not hold** otherwise. What was not measured is listed with the
reason the raw file records.

Keys: ``setup`` (Ray version, cluster, settings), ``overhead``, ``throughput``, ``ceiling``,
``policy``.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _goals import NOT_JUDGED, applies, goal_text, interval, judge, span  # noqa: E402

RAW_NAMES = ("ray",)
HEAD = "result: median (90 % interval over repeats)"


def fmt_for(x: float) -> str:
    """A number format for figures of ``x``'s size (3 significant digits, at least 0 decimals)."""
    x = abs(x)
    if x < 1:
        return "{:.3f}"
    if x < 10:
        return "{:.2f}"
    if x < 100:
        return "{:.1f}"
    return "{:,.0f}"


def _span(values: list[float], unit: str = "", fmt: str | None = None) -> str:
    iv = interval(values)
    return span(iv, fmt or fmt_for(iv.estimate), unit)


def _ratio_span(values: list[float]) -> str:
    iv = interval(values)
    f = fmt_for(iv.estimate) + "x"
    return span(iv, f)


def _by_repeat(rows: list[dict[str, Any]], pred: Callable[[dict[str, Any]], bool]) -> dict[int, dict[str, Any]]:
    return {r["repeat"]: r for r in rows if pred(r)}


def _load(rows: list[dict[str, Any]]) -> str:
    loads = [r["loadavg"] for r in rows if r.get("loadavg") is not None]
    if not loads:
        return ""
    return f"load {min(loads):.1f}" + (f" to {max(loads):.1f}" if max(loads) != min(loads) else "")


def _judged(goal: dict[str, Any] | None, values: list[float], row: dict[str, Any] | None = None) -> tuple[str, str]:
    """The goal cell and the verdict cell."""
    if not goal:
        return "-", "-"
    if row is not None and not applies(goal, row):
        return goal_text(goal), NOT_JUDGED
    if not values:
        return goal_text(goal), "not measured"
    return goal_text(goal), judge(interval(values), goal)


def _notes(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def _not_measured(raw: dict[str, Any], key: str) -> str | None:
    return (raw.get("not_measured") or {}).get(key)


def mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def overhead_figures(raw: dict[str, Any]) -> dict[str, list[float]]:
    """Per repeat (repeats that measured both executors, in order): local ms, ray ms, ray / local."""
    rows = [r for r in raw["rows"] if r["kind"] == "overhead"]
    local = _by_repeat(rows, lambda r: r["executor"] == "local")
    ray = _by_repeat(rows, lambda r: r["executor"] == "ray")
    both = sorted(set(local) & set(ray))
    lm = [mean(local[k]["latency_ms"]) for k in both]
    rm = [mean(ray[k]["latency_ms"]) for k in both]
    return {"local_ms": lm, "ray_ms": rm, "ratio": [r / loc for r, loc in zip(rm, lm, strict=True)]}


def overhead_table(raw: dict[str, Any]) -> str:
    goals = raw.get("goals") or {}
    rows = [r for r in raw["rows"] if r["kind"] == "overhead"]
    if not rows:
        return "(not measured in this raw file)"
    fig = overhead_figures(raw)
    out = [f"| measurement | {HEAD} | goal | verdict | notes |", "|---|---|---|---|---|"]
    for name, label, key, goal in (
            ("local", "controller overhead per evaluation, `local` executor (1 slot), no-op sandbox", "local_ms", None),
            ("ray", "controller overhead per evaluation, `ray` executor (1 actor), no-op sandbox", "ray_ms",
             goals.get("overhead_ms"))):
        mine = [r for r in rows if r["executor"] == name]
        pooled = statistics.median(x for r in mine for x in r["latency_ms"])
        g, v = _judged(goal, fig[key])
        notes = _notes(f"{mine[0]['n']:,} sequential evaluations per repeat after {mine[0].get('warm', 0)} warm-up",
                       f"per-evaluation median over all repeats {fmt_for(pooled).format(pooled)} ms", _load(mine))
        out.append(f"| {label} | {_span(fig[key], 'ms')} | {g} | {v} | {notes} |")
    g, v = _judged(goals.get("overhead_ratio"), fig["ratio"])
    out.append(f"| ray / local (per repeat, the ratio of the two means) | {_ratio_span(fig['ratio'])} | {g} | {v} | "
               "the same no-op evaluations through each executor in the same repeat |")
    return "\n".join(out)


def throughput_figures(raw: dict[str, Any]) -> dict[int, dict[str, list[float]]]:
    """Slots -> per repeat that also measured 1 slot: evaluations/s and speed-up over 1 slot."""
    rows = [r for r in raw["rows"] if r["kind"] == "throughput"]
    base = _by_repeat(rows, lambda r: r["slots"] == 1)
    out: dict[int, dict[str, list[float]]] = {}
    for slots in sorted({r["slots"] for r in rows}):
        mine = _by_repeat(rows, lambda r, s=slots: r["slots"] == s)
        ks = sorted(set(mine) & set(base))
        rate = [mine[k]["evaluations"] / mine[k]["wall_s"] for k in ks]
        out[slots] = {"rate": rate,
                      "speedup": [x / (base[k]["evaluations"] / base[k]["wall_s"]) for x, k in zip(rate, ks, strict=True)]}
    return out


def throughput_table(raw: dict[str, Any]) -> str:
    why = _not_measured(raw, "throughput")
    rows = [r for r in raw["rows"] if r["kind"] == "throughput"]
    if not rows:
        return f"(not measured: {why})" if why else "(not measured in this raw file)"
    goal = (raw.get("goals") or {}).get("speedup")
    fig = throughput_figures(raw)
    sleep = rows[0].get("sleep_s", 1.0)
    out = ["| Ray worker slots | throughput: median (90 % interval over repeats) | speed-up over 1 slot: median "
           "(90 % interval) | goal | verdict | notes |", "|---|---|---|---|---|---|"]
    for slots, f in fig.items():
        mine = [r for r in rows if r["slots"] == slots]
        g, v = _judged(goal, f["speedup"], {"slots": slots}) if goal and applies(goal, {"slots": slots}) else ("-", "-")
        speed = "1 (the reference)" if slots == 1 else _ratio_span(f["speedup"])
        failed = sum(r.get("failed", 0) for r in mine)
        workers = statistics.median(r["workers"] for r in mine)
        n = mine[0]["evaluations"]
        notes = _notes(f"{n} evaluation{'s' * (n != 1)} of {sleep:g} s per repeat",
                       f"{workers:g} worker{'s' * (workers != 1)} used", f"{failed} failed" if failed else "",
                       _load(mine))
        out.append(f"| {slots} | {_span(f['rate'], 'eval/s')} | {speed} | {g} | {v} | {notes} |")
    return "\n".join(out)


def ceiling_table(raw: dict[str, Any]) -> str:
    why = _not_measured(raw, "ceiling")
    ctl = [r for r in raw["rows"] if r["kind"] == "controller_cpu"]
    tx = [r for r in raw["rows"] if r["kind"] == "store_tx"]
    if not ctl and not tx:
        return f"(not measured: {why})" if why else "(not measured in this raw file)"
    out = [f"| measurement | {HEAD} | 64 workers kept busy when an evaluation takes at least | notes |",
           "|---|---|---|---|"]
    if ctl:
        ms = [1000 * r["cpu_s"] / r["n"] for r in ctl]
        ceiling = [r["n"] / r["cpu_s"] for r in ctl]
        busy = [64 * r["cpu_s"] / r["n"] for r in ctl]
        wall = [r["n"] / r["wall_s"] for r in ctl]
        out.append(f"| one controller: CPU per evaluation through the ray executor ({ctl[0]['slots']} slots kept full, "
                   f"no-op sandbox) | {_span(ms, 'ms CPU')} | {_span(busy, 's')} | "
                   + _notes(f"ceiling {_span(ceiling, 'eval/s', '{:,.0f}')} of controller CPU",
                            f"{ctl[0]['n']:,} evaluations per repeat, {_span(wall, 'eval/s', '{:,.0f}')} wall on this "
                            "cluster", _load(ctl)) + " |")
    for backend, label in (("sqlite", "SQLite"), ("postgresql", "PostgreSQL")):
        mine = [r for r in tx if r["backend"] == backend]
        what = (f"one {label} database: one-evaluation transactions (program + evaluation + archive event), "
                f"{mine[0]['threads'] if mine else 8} writer threads")
        if not mine:
            reason = _not_measured(raw, backend) or "not in this raw file"
            out.append(f"| {what} | not measured | - | {reason} |")
            continue
        rate = [r["transactions"] / r["wall_s"] for r in mine]
        busy = [64 * r["wall_s"] / r["transactions"] for r in mine]
        out.append(f"| {what} | {_span(rate, 'eval/s', '{:,.0f}')} | {_span(busy, 's')} | "
                   + _notes(f"{mine[0]['transactions']:,} transactions per repeat", _load(mine)) + " |")
    return "\n".join(out)


def policy_table(raw: dict[str, Any]) -> str:
    gen = [r for r in raw["rows"] if r["kind"] == "policy_generation"]
    push = [r for r in raw["rows"] if r["kind"] == "policy_push"]
    if not gen and not push:
        why = _not_measured(raw, "policy")
        return f"(not measured: {why})" if why else "(not measured in this raw file)"
    ctl = _by_repeat(gen, lambda r: r["where"] == "controller")
    act = _by_repeat(gen, lambda r: r["where"] == "actor")
    both = sorted(set(ctl) & set(act))
    med = statistics.median
    out = [f"| measurement | {HEAD} | notes |", "|---|---|---|"]
    if ctl:
        r0 = next(iter(ctl.values()))
        shape = f"{r0['completions']} completions x {r0['max_tokens']} tokens"
        out.append(f"| generation, tiny `expr_edit` policy in the controller (`transformers`, 1 torch thread), {shape} "
                   f"| {_span([med(r['request_ms']) for r in ctl.values()], 'ms/request')} | "
                   + _notes(f"per repeat the median of {len(r0['request_ms'])} requests", _load(list(ctl.values())))
                   + " |")
    if act:
        out.append(f"| the same requests through a `ray_policy` actor (`num_cpus: 0`) | "
                   f"{_span([med(r['request_ms']) for r in act.values()], 'ms/request')} | "
                   "actor round trip and pickled completions included |")
    if both:
        ratio = [med(act[k]["request_ms"]) / med(ctl[k]["request_ms"]) for k in both]
        out.append(f"| actor / controller (per repeat, the ratio of the two medians) | {_ratio_span(ratio)} | "
                   "both in the same repeat |")
    if push:
        out.append(f"| a new policy version served by the actor (state dict read, `ray.put`, `load_state_dict`) | "
                   f"{_span([med(r['push_ms']) for r in push], 'ms')} | "
                   f"per repeat the median of {len(push[0]['push_ms'])} pushes; {push[0]['parameters']:,} parameters |")
    return "\n".join(out)


def setup_line(raw: dict[str, Any]) -> str:
    m, s = raw["meta"], raw.get("settings") or {}
    c = m.get("cluster") or {}
    cpus = " + ".join(f"{x:g}" for x in c.get("node_cpus", []))
    cluster = (f"a Ray {m.get('ray', '?')} cluster of {c.get('nodes', '?')} nodes ({cpus} CPUs) on this machine, "
               "the controller on the same machine" if c else f"Ray {m.get('ray', '?')}")
    tx = f"{s['store_n'] - 1:,}" if isinstance(s.get("store_n"), int) else "?"
    return (f"Setup: {cluster}; {s.get('repeats', '?')} repeats, each one round of every measurement; "
            f"{s.get('n', '?')} evaluations for the overhead and controller-CPU figures, {s.get('per_slot', '?')} "
            f"evaluations of {s.get('sleep_s', 1):g} s per slot for throughput, {tx} one-evaluation transactions per "
            "store run.")


def render(raw: dict[str, Any]) -> dict[str, str]:
    return {"setup": setup_line(raw), "overhead": overhead_table(raw), "throughput": throughput_table(raw),
            "ceiling": ceiling_table(raw), "policy": policy_table(raw)}
