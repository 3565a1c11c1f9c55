"""Tables and claims of ``benchmarks/results/suite_engine.json`` (``benchmarks/bench_suite.py``).

``render(raw)`` maps a table id to markdown, a pure function of the raw file (the bootstrap
is seeded). Intervals: percentile bootstrap over seeds (90 %, 10,000 resamples of the seeds
both arms ran, paired), of a ratio of means ``mean(A) / mean(B)`` or a difference of means.
A claim **holds** when its interval excludes the null (lies wholly above the claimed factor
or above zero), **holds in the mean** when only the point estimate does, else it **does not
hold**.

Claims (issue 33): (1) the best trained arm (most training targets solved, in the mean,
among the arms run on the most seeds) solves >= 1.3x the frozen base's targets; (2) a diversity arm (IPS, Rare, VPO) ends above
GRPO with the same changes and its last-third slope of targets solved is >= 2x GRPO's; (3)
a diversity arm keeps >= 1.5x GRPO's semantic classes per solved target; (4) the best trained
arm's final policy solves more held-out targets than the frozen base.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["render", "interval", "verdict", "claims"]

LEVEL = 0.9
RESAMPLES = 10_000
# 12 targets on fresh seeds: G = 8, G = 32, 3 examples; the G = 32 arm confirmed on seeds 15-19
RAW_NAMES = ("suite_engine_t12", "suite_engine_g32", "suite_engine_ex3", "suite_engine_g32_confirm")
DIVERSITY = ("ips", "ipsc", "rare", "vpo")


def _ok(raw: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in raw.get("runs", []) if not r.get("error")]


def by_arm(raw: dict[str, Any], value: Callable[[dict[str, Any]], float]) -> dict[str, dict[int, float]]:
    """``{arm: {seed: value}}`` over the finished runs."""
    out: dict[str, dict[int, float]] = {}
    for r in _ok(raw):
        out.setdefault(r["arm"], {})[int(r["seed"])] = float(value(r))
    return out


def interval(a: dict[int, float], b: dict[int, float] | None, kind: str, *, seed: int = 0,
             level: float = LEVEL) -> tuple[float, float, float, int]:
    """``(point, low, high, seeds)`` of ``mean(a)/mean(b)`` (``ratio``), ``mean(a) - mean(b)``
    (``diff``), or ``mean(a)`` (``b`` None), bootstrapped over the seeds both hold (paired)."""
    seeds = sorted(set(a) & set(b)) if b is not None else sorted(a)
    if not seeds:
        return float("nan"), float("nan"), float("nan"), 0
    xa = np.array([a[s] for s in seeds])
    xb = np.array([b[s] for s in seeds]) if b is not None else None

    def stat(ia: np.ndarray) -> np.ndarray:
        ma = xa[ia].mean(axis=-1)
        if xb is None:
            return ma
        mb = xb[ia].mean(axis=-1)
        if kind == "diff":
            return ma - mb
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.where(mb > 0, ma / np.where(mb > 0, mb, 1.0), np.where(ma > 0, np.inf, np.nan))
        return r

    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(seeds), size=(RESAMPLES, len(seeds)))
    boots = np.sort(np.nan_to_num(stat(idx), nan=-np.inf, posinf=np.inf, neginf=-np.inf))  # inf stays inf
    lo = boots[int(round((1 - level) / 2 * (RESAMPLES - 1)))]
    hi = boots[int(round((1 + level) / 2 * (RESAMPLES - 1)))]
    point = float(stat(np.arange(len(seeds))[None, :])[0])
    return point, float(lo), float(hi), len(seeds)


def verdict(point: float, low: float, null: float) -> str:
    """``holds`` (the interval lies above ``null``), ``holds in the mean`` or ``does not hold``."""
    if low > null:
        return "holds"
    if point > null:
        return "holds in the mean"
    return "does not hold"


def _final(key: str) -> Callable[[dict[str, Any]], float]:
    return lambda r: r["curves"][key][-1]


def _slope(r: dict[str, Any]) -> float:
    """Targets solved per 1,000 samples over the last third of the run (curve points)."""
    xs, ys = r["curves"]["samples"], r["curves"]["solved"]
    start = xs[-1] * 2 / 3
    i = min(range(len(xs)), key=lambda j: abs(xs[j] - start))
    if xs[-1] == xs[i]:
        return 0.0
    return 1000.0 * (ys[-1] - ys[i]) / (xs[-1] - xs[i])


def _fmt(x: float, nd: int = 2) -> str:
    if x == float("inf"):
        return "inf"
    if x == float("-inf"):
        return "-inf"
    if x != x:
        return "n/a"
    return f"{x:.{nd}f}"


def _ms(vals: Sequence[float], nd: int = 1) -> str:
    if not vals:
        return "-"
    if len(vals) == 1:
        return _fmt(vals[0], nd)
    return f"{_fmt(statistics.fmean(vals), nd)} ± {_fmt(statistics.stdev(vals), nd)}"


def _head(arm: str) -> tuple[str, str]:
    head, _, rest = arm.partition("+")
    return head, rest


def claims(raw: dict[str, Any]) -> list[dict[str, Any]]:
    """Each claim: text, arms compared, point, interval, null, verdict (module docstring)."""
    solved = by_arm(raw, _final("solved"))
    cps = by_arm(raw, _final("classes_per_solved"))
    held = by_arm(raw, lambda r: r["heldout"]["solved"])
    slope = by_arm(raw, _slope)
    out: list[dict[str, Any]] = []
    trained = [a for a in solved if a != "frozen"]

    def add(cid: str, text: str, a: str, b: str | None, vals: tuple[dict[int, float], dict[int, float] | None],
            kind: str, null: float, seed: int) -> None:
        p, lo, hi, n = interval(vals[0], vals[1], kind, seed=seed)
        out.append({"id": cid, "claim": text, "a": a, "b": b, "kind": kind, "point": p, "low": lo, "high": hi,
                    "null": null, "seeds": n, "verdict": verdict(p, lo, null) if n >= 2 else "not tested"})

    full = max((len(solved[a]) for a in trained), default=0)
    candidates = [a for a in trained if len(solved[a]) == full]  # arms on fewer seeds are not picked
    if "frozen" in solved and candidates:
        best = max(candidates, key=lambda a: statistics.fmean(solved[a].values()))
        add("1", "best trained arm solves >= 1.3x the frozen base's targets", best, "frozen",
            (solved[best], solved["frozen"]), "ratio", 1.3, 1)
        if best in held and "frozen" in held:
            add("4", "the trained policy solves more held-out targets than the frozen one", best, "frozen",
                (held[best], held["frozen"]), "diff", 0.0, 4)
    for arm in [a for a in trained if _head(a)[0] in DIVERSITY]:
        changes = _head(arm)[1]
        ref = "grpo" + (f"+{changes}" if changes else "")
        if ref not in solved:
            continue
        add("2a", "diversity arm ends above GRPO (targets solved)", arm, ref, (solved[arm], solved[ref]), "diff",
            0.0, 2)
        add("2b", "diversity arm's last-third slope >= 2x GRPO's", arm, ref, (slope[arm], slope[ref]), "ratio", 2.0,
            2)
        add("3", "diversity arm keeps >= 1.5x GRPO's classes per solved target", arm, ref, (cps[arm], cps[ref]),
            "ratio", 1.5, 3)
    return out


def _table_solved(raw: dict[str, Any]) -> str:
    cps = raw["settings"]["checkpoints"]
    rows = ["| arm | " + " | ".join(f"{c:,}" for c in cps) + " |", "|---|" + "---|" * len(cps)]
    for arm in raw["arms"]:
        runs = [r for r in _ok(raw) if r["arm"] == arm]
        if not runs:
            continue
        cells = [_ms([r["curves"]["solved"][i] for r in runs]) for i in range(len(cps))]
        rows.append(f"| {arm} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _table_final(raw: dict[str, Any]) -> str:
    rows = ["| arm | seeds | solved | classes / solved | last-third slope /1k | held-out solved | held-out pass@1 "
            "| held-out pass@8 | evaluations | copies | trainer steps | step s | run s |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for arm in raw["arms"]:
        runs = [r for r in _ok(raw) if r["arm"] == arm]
        if not runs:
            continue
        steps = [s for r in runs for s in r["step_seconds"]]
        rows.append("| " + " | ".join([
            arm, ",".join(str(r["seed"]) for r in runs),
            _ms([r["curves"]["solved"][-1] for r in runs]),
            _ms([r["curves"]["classes_per_solved"][-1] for r in runs], 2),
            _ms([_slope(r) for r in runs], 2),
            _ms([r["heldout"]["solved"] for r in runs]),
            _ms([r["heldout"]["pass@1"] for r in runs], 3),
            _ms([r["heldout"]["pass@8"] for r in runs], 3),
            _ms([r["evaluations"] for r in runs], 0), _ms([r["copies"] for r in runs], 0),
            _ms([r["trainer_steps"] for r in runs], 0),
            _fmt(statistics.fmean(steps), 2) if steps else "-",
            _ms([r["run_wall_s"] for r in runs], 0)]) + " |")
    return "\n".join(rows)


def _table_changes(raw: dict[str, Any]) -> str:
    """One line per arm with design changes: against the same objective without them, and frozen."""
    solved = by_arm(raw, _final("solved"))
    held = by_arm(raw, lambda r: r["heldout"]["solved"])
    cps = by_arm(raw, _final("classes_per_solved"))
    rows = ["| arm | against | Δ solved [90 % CI] | Δ held-out solved [90 % CI] | classes / solved ratio [90 % CI] "
            "| seeds |", "|---|---|---|---|---|---|"]
    for arm in raw["arms"]:
        head, changes = _head(arm)
        if not changes or arm not in solved:
            continue
        for ref in (head, "frozen"):
            if ref not in solved or ref == arm:
                continue
            d = interval(solved[arm], solved[ref], "diff", seed=5)
            h = interval(held[arm], held[ref], "diff", seed=6)
            c = interval(cps[arm], cps[ref], "ratio", seed=7)
            def ci(x: tuple[float, float, float, int], nd: int) -> str:
                if x[3] < 2:  # one seed: no interval
                    return f"{_fmt(x[0], nd)} (no interval)"
                return f"{_fmt(x[0], nd)} [{_fmt(x[1], nd)}, {_fmt(x[2], nd)}]"

            rows.append(f"| {arm} | {ref} | {ci(d, 1)} | {ci(h, 1)} | {ci(c, 2)} | {d[3]} |")
    return "\n".join(rows) if len(rows) > 2 else "No arm with design changes in this raw file."


def _table_claims(raw: dict[str, Any]) -> str:
    rows = ["| # | claim | arms | estimate [90 % CI] | null | seeds | verdict |", "|---|---|---|---|---|---|---|"]
    for c in claims(raw):
        what = "ratio" if c["kind"] == "ratio" else "difference"
        rows.append(f"| {c['id']} | {c['claim']} | {c['a']} vs {c['b']} | {what} {_fmt(c['point'])} "
                    f"[{_fmt(c['low'])}, {_fmt(c['high'])}] | {_fmt(c['null'], 1)} | {c['seeds']} | "
                    f"**{c['verdict']}** |")
    return "\n".join(rows) if len(rows) > 2 else "No claim could be tested (arms missing)."


def _commit_rows(raw: dict[str, Any]) -> list[str]:
    """A row naming each commit that measured runs, when a resumed file holds more than one."""
    by: dict[str, list[str]] = {}
    for r in _ok(raw):
        if r.get("commit"):
            by.setdefault(str(r["commit"])[:12], []).append(r["arm"])
    if len(by) < 2:
        return []
    parts = [f"`{c}`: {len(arms)} runs ({', '.join(dict.fromkeys(arms))})" for c, arms in by.items()]
    return [f"| runs measured on | {'; '.join(parts)} |"]


def _table_run(raw: dict[str, Any]) -> str:
    m, s = raw["meta"], raw["settings"]
    load = ", ".join(f"{x:.1f}" for x in m["loadavg"])
    return "\n".join([
        "| field | value |", "|---|---|",
        f"| command | `{m['command']}` |", f"| date | {m['date']} |",
        f"| commit | `{m['commit'][:12]}`{' (dirty)' if m['dirty'] else ''} |",
        f"| seeds | {', '.join(str(x) for x in m['seeds'])} |",
        f"| targets | {len(s['targets'])} ({', '.join(s['targets'])}) |",
        f"| samples per run | {s['samples']:,} ({s['samples_per_target']} per target), {s['examples']} examples "
        f"per target, groups of {s.get('group', 8)} children per parent, a trainer step every {s.get('every', 64)} "
        f"evaluations |",
        f"| runs finished | {len(_ok(raw))} of {len(raw['arms']) * len(m['seeds'])} |",
        *_commit_rows(raw),
        f"| wall time | {_fmt(m.get('wall_s', 0.0) / 60, 1)} min (runs in parallel) |",
        f"| load (1, 5, 15 min) at the last write | {load} |",
        f"| machine | {m['machine']['cpu_count']} CPUs, torch {m['machine']['torch']} |"])


def summary(raw: dict[str, Any]) -> str:
    """The README's line on what the join buys on the suite: claim 1, computed (never canned)."""
    c = next((c for c in claims(raw) if c["id"] == "1"), None)
    if c is None:
        return "not measured (the frozen arm or a trained arm is missing)"
    solved = by_arm(raw, _final("solved"))
    n_targets = len(raw["settings"]["targets"])
    more = c["low"] > 1.0
    return (f"on {n_targets} suite targets through the engine, the best trained arm ({c['a']}) solves "
            f"{statistics.fmean(solved[c['a']].values()):.1f} targets against the frozen base's "
            f"{statistics.fmean(solved['frozen'].values()):.1f}, x{_fmt(c['point'])} (90 % interval "
            f"{_fmt(c['low'])} to {_fmt(c['high'])}, {c['seeds']} seeds): "
            + ("more than frozen, " if more else "not surely more than frozen, ")
            + f"and the >= {_fmt(c['null'], 1)}x target {c['verdict']}")


def _table_groups(raw: dict[str, Any]) -> str:
    """Per arm, mean ± sd over seeds of the runs' ``groups`` statistics (``suite_engine.group_stats``):
    what a class-keyed objective can act on."""
    runs = [r for r in _ok(raw) if r.get("groups")]
    if not runs:
        return "(group statistics not recorded in this raw file: `bench_suite.py --remeasure-groups WORK`)"
    cols = [("rewarded_share", "children with reward > 0"), ("groups_with_1", "groups with >= 1 rewarded"),
            ("groups_with_2", "groups with >= 2 rewarded"),
            ("groups_repeated_rewarded_class", "groups where 2 rewarded children share a class")]
    lines = ["| arm | seeds | groups per run | " + " | ".join(c for _, c in cols) + " |",
             "|---|---|---|" + "---|" * len(cols)]
    for arm in raw["arms"]:
        rs = [r for r in runs if r["arm"] == arm]
        if rs:
            lines.append(f"| {arm} | {len(rs)} | {_mean_sd(rs, 'groups', pct=False)} | "
                         + " | ".join(_mean_sd(rs, k) for k, _ in cols) + " |")
    return "\n".join(lines)


def _mean_sd(runs: list[dict[str, Any]], key: str, *, pct: bool = True) -> str:
    """Mean ± sd over runs of one ``groups`` statistic (a share shown in %, or a count)."""
    xs = [float(r["groups"][key]) * (100 if pct else 1) for r in runs]
    sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
    nd = 1 if pct else 0
    return f"{statistics.fmean(xs):.{nd}f}{' %' if pct else ''} ± {sd:.{nd}f}"


def render(raw: dict[str, Any]) -> dict[str, str]:
    """Table id -> markdown (module docstring); ``summary``: the README's one line."""
    return {"run": _table_run(raw), "solved": _table_solved(raw), "final": _table_final(raw),
            "changes": _table_changes(raw), "claims": _table_claims(raw), "groups": _table_groups(raw),
            "summary": summary(raw)}
