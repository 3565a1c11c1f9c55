"""Tables, claims and plot of the joined loop at equal model calls (``benchmarks/bench_policy_samples.py``)
from ``benchmarks/results/policy_samples.json``.

A run's records are the (call, score) pairs that entered its running top 10 (the raw file keeps
only those; both curves depend on nothing else). At call budget c = 0..C a run has a best score
and a top-10 mean (of all its scores while fewer than 10 exist); an arm's curve is the median
over its seeds at each c, and "calls to reach T" is the first c where a median curve is >= T.

Claim per trained arm and task: it reaches the frozen base's final median best (or top-10 mean)
in fewer calls than the frozen base itself, i.e. the ratio reach(arm) / reach(frozen) < 1 (not
reached: infinitely many calls). Its interval is a percentile bootstrap over seeds (the seed
indices resampled with replacement, the same indices for both arms: paired by seed; medians,
target and both calls recomputed per resample; ``_raw.bootstrap_interval``), judged by
``_raw.verdict``.
"""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _raw import bootstrap_interval, verdict  # noqa: E402

PNG = "docs/bench_policy_samples.png"
PLOT_POINTS = 128
RESAMPLES = 2000


def curves(records: list[list[float]], calls: int) -> tuple[np.ndarray, np.ndarray]:
    """(best, top-10 mean) at every call budget 0..calls (NaN before the first record)."""
    best = np.full(calls + 1, np.nan)
    top10 = np.full(calls + 1, np.nan)
    top: list[float] = []
    for call, score in sorted((int(c), float(s)) for c, s in records):
        if call > calls:
            break
        top = sorted([*top, score], reverse=True)[:10]
        best[call], top10[call] = top[0], sum(top) / len(top)
    for arr in (best, top10):  # carry each value forward to the next record
        last = np.nan
        for i in range(len(arr)):
            if math.isnan(arr[i]):
                arr[i] = last
            else:
                last = arr[i]
    return best, top10


def reach(curve: np.ndarray, target: float) -> float:
    hit = np.nonzero(curve >= target - 1e-12)[0]
    return float(hit[0]) if len(hit) else math.inf


def _runs(raw: dict[str, Any], task: str, arm: str) -> list[dict[str, Any]]:
    return sorted((r for r in raw["runs"] if r["task"] == task and r["arm"] == arm), key=lambda r: r["seed"])


def _curves(raw: dict[str, Any], task: str, arm: str) -> tuple[np.ndarray, np.ndarray]:
    cs = [curves(r["records"], raw["calls"]) for r in _runs(raw, task, arm)]
    return np.array([c[0] for c in cs]), np.array([c[1] for c in cs])


def _med(rows: np.ndarray) -> np.ndarray:
    """``np.nanmedian(rows, axis=0)`` (NaN where a column has no value), by one sort: numpy's own
    takes a masked-array path per call that made this renderer's 4,000-resample bootstraps
    take 88 s of the report's 97."""
    rows = np.asarray(rows, dtype=float)
    s = np.sort(rows, axis=0)  # NaNs sort last
    n = np.sum(~np.isnan(rows), axis=0)
    out = np.full(rows.shape[1:], np.nan)
    ok = n > 0
    cols = np.nonzero(ok)[0]
    out[ok] = (s[(n[ok] - 1) // 2, cols] + s[n[ok] // 2, cols]) / 2
    return out


def _fmt_calls(x: float) -> str:
    return "not within the budget" if math.isinf(x) else f"{x:,.0f}"


def _g(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".") if x == x else "-"


def ratio_interval(frozen: np.ndarray, arm: np.ndarray) -> Any:
    """reach(arm's median curve, frozen's final median) / reach(frozen's own) with its paired bootstrap interval."""
    k = min(len(frozen), len(arm))
    seen: dict[tuple[int, ...], float] = {}  # a median depends only on which seeds, not their order

    def stat(idx: np.ndarray) -> float:
        key = tuple(sorted(idx.astype(int).tolist()))
        if key not in seen:
            rows = list(key)
            f, a = _med(frozen[rows]), _med(arm[rows])
            target = f[-1]
            seen[key] = reach(a, target) / max(reach(f, target), 1.0)
        return seen[key]

    return bootstrap_interval(np.arange(k, dtype=float), stat, n=RESAMPLES)


def _ratio(iv: Any) -> str:
    """``0.78x [0.61x, 1.20x]`` (90 % interval); ``not reached`` for an infinite end."""
    f = lambda x: "not reached" if math.isinf(x) else f"{x:.2f}x"  # noqa: E731
    return f"{f(iv.estimate)} [{f(iv.lo)}, {f(iv.hi)}]" if iv.has_interval else f"{f(iv.estimate)} (no interval)"


def table(raw: dict[str, Any], task: str) -> str:
    calls = raw["calls"]
    arms = [a for a in raw["arms"] if _runs(raw, task, a)]
    fb, ft = _curves(raw, task, "frozen")
    f_best, f_top = _med(fb), _med(ft)
    lines = [f"| arm | seeds | final median best (per seed) | median top-10 mean at {calls:,} (per seed) | calls to reach "
             "frozen's final median best: ratio to frozen's own [90 % interval] | calls to reach frozen's final median "
             "top-10 mean: ratio [90 % interval] |",
             "|---|---|---|---|---|---|"]
    for arm in arms:
        b, t = _curves(raw, task, arm)
        mb, mt = _med(b), _med(t)
        per_best = ", ".join(_g(x) for x in b[:, -1])
        per_top = ", ".join(_g(x) for x in t[:, -1])
        if arm == "frozen":
            cb = f"{_fmt_calls(reach(f_best, f_best[-1]))} (its own)"
            ct = f"{_fmt_calls(reach(f_top, f_top[-1]))} (its own: {_g(f_top[-1])})"
        else:
            rb, rt = ratio_interval(fb, b), ratio_interval(ft, t)
            cb = f"{_fmt_calls(reach(mb, f_best[-1]))}: {_ratio(rb)}"
            ct = f"{_fmt_calls(reach(mt, f_top[-1]))}: {_ratio(rt)}"
        lines.append(f"| {arm} | {len(b)} | {_g(mb[-1])} ({per_best}) | {_g(mt[-1])} ({per_top}) | {cb} | {ct} |")
    return "\n".join(lines)


def claims(raw: dict[str, Any]) -> str:
    lines = ["| task | arm | claim | ratio of calls (90 % bootstrap interval) | verdict |", "|---|---|---|---|---|"]
    for task in raw["tasks"]:
        fb, ft = _curves(raw, task, "frozen")
        for arm in raw["arms"]:
            if arm == "frozen" or not _runs(raw, task, arm):
                continue
            b, t = _curves(raw, task, arm)
            for what, f, a in (("best", fb, b), ("top-10 mean", ft, t)):
                iv = ratio_interval(f, a)
                lines.append(f"| {task} | {arm} | reaches the frozen base's final median {what} in fewer calls "
                             f"(ratio < 1) | {iv.text('{:.2f}', 'x')} | {verdict(iv, 1.0, 'less')} |")
    return "\n".join(lines)


def _reward_of(raw: dict[str, Any], arm: str) -> str:
    """What ``arm``'s rollout reward is (its ``train`` settings in the raw file), or ``-`` when not recorded."""
    train = ((raw.get("arm_settings") or {}).get(arm) or {}).get("train") or {}
    if not train:
        return "-"
    shaping = ", ".join(f"{k} {v:+g}" for k, v in (train.get("shaping") or {}).items())
    return f"{train.get('reward', 'score')}" + (f"; {shaping}" if shaping else "")


def spend(raw: dict[str, Any], task: str) -> str:
    """How each arm spent its calls (means over seeds) and how its reward and copies moved.

    The reward is each arm's own (``train.reward`` and shaping): it is comparable over windows of
    one arm, not between arms whose reward differs (the reward column says which it is)."""
    lines = ["| arm | evaluated | copies | failed | trainer steps | policy versions sampled | copies in the first / last "
             "window (median) | mean reward, first / last window (median; the arm's own reward) | reward |",
             "|---|---|---|---|---|---|---|---|---|"]
    for arm in raw["arms"]:
        rs = _runs(raw, task, arm)
        if not rs:
            continue
        m = {k: statistics.fmean(r[k] for r in rs) for k in ("evaluated", "copies", "failed", "trainer_steps",
                                                              "versions_sampled")}
        cop = [statistics.median(r["copies_by_window"][i] for r in rs) for i in (0, -1)]
        rew = [statistics.median(x for r in rs if (x := r["reward_by_window"][i]) is not None) for i in (0, -1)]
        lines.append(f"| {arm} | {m['evaluated']:.0f} | {m['copies']:.0f} | {m['failed']:.0f} | {m['trainer_steps']:.1f} | "
                     f"{m['versions_sampled']:.1f} | {cop[0]:.2f} / {cop[1]:.2f} | {rew[0]:.2f} / {rew[1]:.2f} | "
                     f"{_reward_of(raw, arm)} |")
    width = raw["runs"][0]["window_calls"] if raw["runs"] else 0
    note = "" if raw.get("arm_settings") else (" The raw file records no arm settings (`-`): the arms' rewards are "
                                               "those of `ARMS` in `benchmarks/bench_policy_samples.py` at its commit.")
    return "\n".join(lines) + f"\n\n(Windows of {width} calls.{note})"


DEFAULT_ARM = "ips+all"  # examples/expr_evolution's default train settings (the README's figure)


def summary(raw: dict[str, Any], arm: str = DEFAULT_ARM) -> str:
    """One sentence for the README: ``arm``'s calls to the frozen base's final median top-10 mean, per task."""
    if arm not in raw.get("arms", []) or "frozen" not in raw.get("arms", []):
        return f"not measured (no {arm} or no frozen arm in the raw file)"
    parts = []
    for task in raw["tasks"]:
        if not _runs(raw, task, arm) or not _runs(raw, task, "frozen"):
            continue
        (_, ft), (_, t) = _curves(raw, task, "frozen"), _curves(raw, task, arm)
        iv = ratio_interval(ft, t)
        parts.append(f"{task} {iv.text('{:.2f}', 'x')}: {verdict(iv, 1.0, 'less')}")
    seeds = len(_runs(raw, raw["tasks"][0], arm)) if raw["tasks"] else 0
    return (f"with the tiny policy trained in the loop ({arm}, {seeds} seeds, {raw['calls']:,} model calls per run), "
            "the calls to reach the frozen policy's final median top-10 mean, as a ratio to the frozen policy's own "
            "(< 1 claimed): " + "; ".join(parts))


def render(raw: dict[str, Any]) -> dict[str, str]:
    out = {"claims": claims(raw), "summary": summary(raw)}
    for task in raw["tasks"]:
        key = task.replace(":", "_")
        out[f"{key}"] = table(raw, task)
        out[f"{key}-spend"] = spend(raw, task)
    minutes = raw.get("minutes_per_task") or {}
    out["time"] = ("Wall time per task (every arm and seed): " +
                   ", ".join(f"{t} {m:.1f} min" for t, m in minutes.items()) + ".") if minutes else ""
    return out


def plots(raw: dict[str, Any]) -> dict[str, dict[str, Any]]:
    calls = raw["calls"]
    xs = sorted({*range(0, calls + 1, max(1, calls // PLOT_POINTS)), calls})
    data: dict[str, Any] = {"calls": xs, "tasks": {}}
    for task in raw["tasks"]:
        data["tasks"][task] = {}
        for arm in raw["arms"]:
            if not _runs(raw, task, arm):
                continue
            b, t = _curves(raw, task, arm)
            data["tasks"][task][arm] = {
                key: {"median": [None if math.isnan(v) else round(float(v), 6) for v in _med(c)[xs]],
                      "lo": [None if math.isnan(v) else round(float(v), 6) for v in np.nanmin(c, axis=0)[xs]],
                      "hi": [None if math.isnan(v) else round(float(v), 6) for v in np.nanmax(c, axis=0)[xs]]}
                for key, c in (("best", b), ("top10", t))}
    return {PNG: data}


def draw(png: Path, data: dict[str, Any]) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _plots import draw_task_grid

    draw_task_grid(png, data["tasks"], data["calls"])
