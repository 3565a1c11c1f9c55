"""Tables of the sample-efficiency benchmark, rendered from ``benchmarks/results/samples.json`` alone.

``render(raw)`` maps a table id to markdown (and the README figure key ``summary`` to one
line of text); it is a pure function of the raw file (the bootstrap generator is seeded).
``python benchmarks/reports/samples.py [--raw FILE] [--write]`` prints the tables, and with
``--write`` rewrites the ``<!-- report:samples:ID -->`` blocks of BENCHMARKS.md and the
``<!-- figure:samples:KEY -->`` blocks of README.md.

Definitions (``bench_samples.py`` writes per run the evaluated ``(call, score)`` pairs, the
seed being call 0; a budget of N calls):

* best curve of a run: ``b(c) = max{score of programs from calls <= c}``, c = 0..N; top-10
  curve: the mean of the 10 largest such scores.
* a framework's median curve: ``m(c) = median over its seeds of b(c)``; its **median best**
  is ``m(N)``.
* calls to reach T: the first c with ``m(c) >= T`` (not reached within N: infinite).
* the ratio against framework F (the target of issue 30): ``R = calls of qdevolve's median
  curve to reach F's median best / calls of F's own median curve to reach it``. When F's
  median never leaves the seed score (its own calls are 0) the ratio is taken as 1 (no
  advantage can be shown).
* interval: percentile bootstrap over seeds (Efron & Tibshirani 1993, ch. 13), 90 %, 4000
  resamples from ``numpy.random.default_rng(0)``; a resample draws seed indices with
  replacement and uses the same indices for both frameworks (seed s shares the server seed);
  every quantity above, the target included, is recomputed on the resample. The ends are
  order statistics (no interpolation, so "not reached" stays infinite).
* the difference of final median bests, ``median_s b_qdevolve(N) - median_s b_F(N)``, with the same
  paired bootstrap; "qdevolve's median best is higher" holds when the interval's lower end is > 0.
* verdict for "qdevolve needs <= 0.5x F's calls": **holds** when the interval's upper end is
  <= 0.5, **holds in the mean** when only the point estimate is, **does not hold** otherwise.
  The issue's target is met when it holds against every framework on at least 3 of 4 tasks.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

import numpy as np

__all__ = ["render", "curves", "ratio_interval", "NULL", "LEVEL"]

NULL = 0.5
LEVEL = 0.9
RESAMPLES = 4000
NAMES = {"qdevolve": "qdevolve", "openevolve": "OpenEvolve", "shinka": "ShinkaEvolve"}
TASK_NAMES = {"circle_packing": "circle packing n = 26", "erdos_min_overlap": "Erdős minimum overlap",
              "autocorrelation_c1": "first autocorrelation C1", "heilbronn_triangle": "Heilbronn triangle n = 8"}


def curves(records: list[list[float]], n_calls: int) -> tuple[np.ndarray, np.ndarray]:
    """(best, top-10 mean) of one run at every call budget 0..n_calls (NaN before any score)."""
    best, top = np.full(n_calls + 1, np.nan), np.full(n_calls + 1, np.nan)
    seen: list[float] = []
    by_call: dict[int, list[float]] = {}
    for call, score in records:
        if call <= n_calls and score is not None and math.isfinite(score):
            by_call.setdefault(int(call), []).append(float(score))
    for c in range(n_calls + 1):
        seen = sorted(seen + by_call.get(c, []), reverse=True)[:10]
        if seen:
            best[c], top[c] = seen[0], sum(seen) / len(seen)
    return best, top


def _median_curve(rows: np.ndarray) -> np.ndarray:
    """Median over runs (rows) at every call, ignoring NaN; NaN where no run has a score."""
    out = np.full(rows.shape[1], np.nan)
    ok = ~np.all(np.isnan(rows), axis=0)
    out[ok] = np.nanmedian(rows[:, ok], axis=0)
    return out


def _reach(curve: np.ndarray, target: float) -> float:
    hit = np.nonzero(curve >= target - 1e-12)[0]
    return float(hit[0]) if len(hit) else math.inf


def _ratio(ours: np.ndarray, theirs: np.ndarray) -> tuple[float, float, float, float]:
    """(ratio, qdevolve's calls, F's own calls, F's median best) for best-curve arrays (seeds x calls)."""
    m_ours, m_theirs = _median_curve(ours), _median_curve(theirs)
    target = float(m_theirs[-1])
    own, reach = _reach(m_theirs, target), _reach(m_ours, target)
    ratio = 1.0 if own == 0 else reach / own
    return ratio, reach, own, target


def _first(curves: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Per row, the first call where the curve is >= its target (inf when never)."""
    hit = curves >= targets[:, None] - 1e-12
    return np.where(hit.any(axis=1), hit.argmax(axis=1), np.inf)


def _ratios(ours: np.ndarray, theirs: np.ndarray) -> np.ndarray:
    """``_ratio`` of every resample at once; ``ours``/``theirs``: resamples x seeds x calls."""
    with np.errstate(all="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns stay NaN and never reach
            m_ours, m_theirs = np.nanmedian(ours, axis=1), np.nanmedian(theirs, axis=1)
        target = m_theirs[:, -1]
        own, reach = _first(m_theirs, target), _first(m_ours, target)
        return np.where(own == 0, 1.0, reach / np.where(own == 0, 1, own))


def ratio_interval(ours: np.ndarray, theirs: np.ndarray, *, seed: int = 0,
                   n: int = RESAMPLES) -> tuple[float, float, float, float, float, float]:
    """(ratio, lo, hi, qdevolve's calls, F's calls, F's median best); rows of both paired by seed index."""
    ratio, reach, own, target = _ratio(ours, theirs)
    k = min(len(ours), len(theirs))
    if k < 2:
        return ratio, math.nan, math.nan, reach, own, target
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, k, size=(n, k))
    stats = np.sort(_ratios(ours[idx], theirs[idx]))
    lo = float(stats[math.floor((1 - LEVEL) / 2 * (n - 1))])
    hi = float(stats[math.ceil((1 + LEVEL) / 2 * (n - 1))])
    return ratio, lo, hi, reach, own, target


def diff_interval(ours: np.ndarray, theirs: np.ndarray, *, seed: int = 0,
                  n: int = RESAMPLES) -> tuple[float, float, float]:
    """``median(ours) - median(theirs)`` of final best scores and its paired-seed bootstrap interval."""
    d = float(np.median(ours) - np.median(theirs))
    if len(ours) < 2:
        return d, math.nan, math.nan
    idx = np.random.default_rng(seed).integers(0, len(ours), size=(n, len(ours)))
    stats = np.sort(np.median(ours[idx], axis=1) - np.median(theirs[idx], axis=1))
    return d, float(stats[math.floor((1 - LEVEL) / 2 * (n - 1))]), float(stats[math.ceil((1 + LEVEL) / 2 * (n - 1))])


def verdict(ratio: float, hi: float) -> str:
    if not ratio <= NULL:
        return "does not hold"
    return "holds" if hi <= NULL else "holds in the mean"


def _x(v: float) -> str:
    return "not reached" if math.isinf(v) else f"{v:.2f}x"


def _c(v: float) -> str:
    return "-" if math.isinf(v) else str(int(v))


def _runs(raw: dict) -> dict[tuple[str, str], dict[int, dict]]:
    out: dict[tuple[str, str], dict[int, dict]] = {}
    for r in raw["runs"]:
        if r.get("records"):
            out.setdefault((r["task"], r["arm"]), {})[int(r["seed"])] = r
    return out


def _fmt(v: float) -> str:
    return f"{v:.6g}" if math.isfinite(v) else "-"


def _niced(meta: dict) -> str:
    """The ``nice`` prefix of the command: the recorded niceness; files written before it was recorded
    were all run under ``nice -n 10`` (their sections say so)."""
    n = meta.get("nice", 10)
    return f"nice -n {n} " if n else ""


def _meta_md(raw: dict, name: str) -> str:
    """Commit, dates, command, seeds, budget and load of a raw file, as one paragraph."""
    meta, n = raw["meta"], int(raw["calls"])
    seeds = [int(s) for s in meta["seeds"]]
    mach = meta.get("machine", {})
    loads = meta.get("loadavg_runs")
    meta_md = (f"Raw file `benchmarks/results/{name}.json`: commit `{str(meta.get('commit'))[:12]}`"
               f"{' (dirty tree)' if meta.get('dirty') else ''}"
               + (f" (resumed on {', '.join(meta['resumed'])}; commits {', '.join(c[:12] for c in meta['commits'])})"
                  if meta.get("resumed") else "")
               + f", started {meta.get('date')}, last run written {meta.get('finished', '-')}; command "
               f"`{_niced(meta)}{meta.get('command')}`; seeds {seeds[0]}-{seeds[-1]} ({len(seeds)}); {n} model calls per "
               f"run, {raw.get('concurrency')} requests in flight, {raw.get('workers')} evaluation workers; "
               f"{mach.get('cpu_count')} cores, 1-minute load average {meta['loadavg'][0]} at the start"
               + (f" and {loads[0]}-{loads[1]} sampled after each run" if loads else "")
               + f"; OpenEvolve {mach.get('openevolve')}, ShinkaEvolve {mach.get('shinka-evolve')}, "
               f"Python {mach.get('python')}.")
    return meta_md


def render(raw: dict) -> dict[str, str]:
    """Table id -> markdown (``meta``, ``settings``, ``final``, ``reach``, ``difference``, ``target``,
    ``missing``) and ``summary`` (the README line)."""
    n, ref = int(raw["calls"]), raw.get("reference", "qdevolve")
    arms, tasks, seeds = raw["arms"], raw["tasks"], [int(s) for s in raw["meta"]["seeds"]]
    held = set(raw.get("held_out", []))
    runs = _runs(raw)
    best = {key: {s: curves(r["records"], n) for s, r in by_seed.items()} for key, by_seed in runs.items()}

    final = ["| task (seed score) | " + " | ".join(f"{NAMES.get(a, a)}: median best [min-max], top-10 median (seeds)"
                                                   for a in arms) + " |", "|---|" + "---|" * len(arms)]
    for t in tasks:
        seed_scores = [c[0][0] for k, v in best.items() if k[0] == t for c in v.values() if not math.isnan(c[0][0])]
        cells = []
        for a in arms:
            cs = best.get((t, a), {})
            if not cs:
                cells.append("missing")
                continue
            finals = [c[0][-1] for c in cs.values()]
            tops = [c[1][-1] for c in cs.values()]
            cells.append(f"{_fmt(float(np.median(finals)))} [{min(finals):.4g} to {max(finals):.4g}], "
                         f"{_fmt(float(np.median(tops)))} ({len(cs)})")
        label = TASK_NAMES.get(t, t) + (" (held out)" if t in held else "")
        seed_txt = f" ({seed_scores[0]:.6g})" if seed_scores else ""
        final.append(f"| {label}{seed_txt} | " + " | ".join(cells) + " |")

    others = [a for a in arms if a != ref]
    reach = ["| task | against | qdevolve's calls to reach its median best | its own calls | ratio "
             "(90 % interval) | seeds | verdict (<= 0.5x) |", "|---|---|---|---|---|---|---|"]
    holds: dict[str, list[str]] = {a: [] for a in others}
    results: dict[tuple[str, str], tuple] = {}
    for t in tasks:
        if (t, ref) not in best:
            continue
        for a in others:
            if (t, a) not in best:
                reach.append(f"| {TASK_NAMES.get(t, t)} | {NAMES.get(a, a)} | missing | | | | |")
                continue
            common = sorted(set(best[(t, ref)]) & set(best[(t, a)]))
            ours = np.array([best[(t, ref)][s][0] for s in common])
            theirs = np.array([best[(t, a)][s][0] for s in common])
            ratio, lo, hi, r_ours, r_own, target = ratio_interval(ours, theirs)
            v = verdict(ratio, hi)
            results[(t, a)] = (ratio, lo, hi, v, len(common))
            if v == "holds":
                holds[a].append(t)
            interval = "no interval" if math.isnan(lo) else f"{_x(lo)} to {_x(hi)}"
            reach.append(f"| {TASK_NAMES.get(t, t)}{' (held out)' if t in held else ''} | {NAMES.get(a, a)} "
                         f"({target:.6g}) | {_c(r_ours)} | {_c(r_own)} | **{_x(ratio)}** ({interval}) | "
                         f"{len(common)} | {v} |")

    diff = ["| task | against | qdevolve's median best minus theirs (90 % interval) | seeds | "
            "qdevolve's median best is higher |", "|---|---|---|---|---|"]
    for t in tasks:
        for a in others:
            if (t, ref) not in best or (t, a) not in best:
                continue
            common = sorted(set(best[(t, ref)]) & set(best[(t, a)]))
            d, lo, hi = diff_interval(np.array([best[(t, ref)][s][0][-1] for s in common]),
                                      np.array([best[(t, a)][s][0][-1] for s in common]))
            v = "does not hold" if not d > 0 else ("holds" if lo > 0 else "holds in the mean")
            iv = "no interval" if math.isnan(lo) else f"{lo:+.4g} to {hi:+.4g}"
            diff.append(f"| {TASK_NAMES.get(t, t)}{' (held out)' if t in held else ''} | {NAMES.get(a, a)} | "
                        f"{d:+.4g} ({iv}) | {len(common)} | {v} |")

    complete = [t for t in tasks if all(len(best.get((t, a), {})) == len(seeds) for a in arms)]
    target_lines = []
    for a in others:
        k = len(holds[a])
        target_lines.append(f"- against {NAMES.get(a, a)}: holds on {k} of {len(tasks)} tasks"
                            + (f" ({', '.join(TASK_NAMES.get(t, t) for t in holds[a])})" if k else "")
                            + f": {'met' if k >= 3 else 'not met'} (>= 3 of 4 needed)")
    met = all(len(holds[a]) >= 3 for a in others) and len(tasks) >= 4
    target_lines.append(f"- the target (<= 0.5x with the interval's upper end <= 0.5x, against every framework, "
                        f"on >= 3 of 4 tasks): **{'met' if met else 'not met'}**"
                        + ("" if len(complete) == len(tasks) else
                           f" (only {len(complete)} of {len(tasks)} tasks have every arm at {len(seeds)} seeds)"))
    for t in held:
        parts = [f"{NAMES.get(a, a)} {_x(results[(t, a)][0])}, {results[(t, a)][3]}" for a in others
                 if (t, a) in results]
        if parts:
            target_lines.append(f"- held-out task {TASK_NAMES.get(t, t)} (the test): " + "; ".join(parts))

    missing = []
    for t in tasks:
        for a in arms:
            have = sorted(best.get((t, a), {}))
            failed = sorted(int(r["seed"]) for r in raw["runs"] if (r["task"], r["arm"]) == (t, a) and r.get("error"))
            lacking = [s for s in seeds if s not in have]
            if lacking or failed:
                missing.append(f"| {TASK_NAMES.get(t, t)} | {NAMES.get(a, a)} | {len(have)} of {len(seeds)} | "
                               f"{', '.join(map(str, lacking)) or 'none'} | {', '.join(map(str, failed)) or 'none'} |")
    missing_md = ("Every task, framework and seed of the plan has a run with scores."
                  if not missing else "| task | framework | seeds with scores | seeds missing | seeds whose run "
                  "reported an error |\n|---|---|---|---|---|\n" + "\n".join(missing))

    settings = "\n".join(f"- {NAMES.get(a, a)}: {raw['settings'][a]}" for a in arms if a in raw.get("settings", {}))
    parts = []
    for a in others:
        rs = sorted(results[(t, a)][0] for t in tasks if (t, a) in results)
        span = f"{_x(rs[0])}-{_x(rs[-1])}" if rs else "-"
        best_t = min((t for t in tasks if (t, a) in results), key=lambda t: results[(t, a)][0], default=None)
        at_best = ""
        if best_t is not None and not math.isnan(results[(best_t, a)][1]):
            r = results[(best_t, a)]
            at_best = f"; lowest on {TASK_NAMES.get(best_t, best_t)}: {_x(r[0])}, 90 % interval {_x(r[1])} to {_x(r[2])}"
        parts.append(f"{NAMES.get(a, a)}'s in {span} of its calls ({len(holds[a])} of {len(rs)} tasks at <= 0.5x "
                     f"with the 90 % interval's upper end <= 0.5x{at_best})")
    nseeds = sorted({len(v) for v in best.values()})
    seeds_txt = f"{nseeds[0]}" if len(nseeds) == 1 else f"{nseeds[0]}-{nseeds[-1]}"
    summary = ("qdevolve's default search reaches the median best score of " + " and ".join(parts)
               + f" on {len(tasks)} tasks, {seeds_txt} seeds, {n} model calls: the target (3 of 4 against each) is "
               + ("met" if met else "not met"))
    meta_md = _meta_md(raw, "samples")
    return {"meta": meta_md, "settings": settings, "final": "\n".join(final), "reach": "\n".join(reach),
            "difference": "\n".join(diff),
            "target": "\n".join(target_lines), "missing": missing_md, "summary": summary}


PNG = "docs/bench_samples.png"


def _r(a: np.ndarray) -> list[float | None]:
    return [None if math.isnan(v) else round(float(v), 6) for v in a]


def plots(raw: dict) -> dict[str, dict]:
    """``docs/bench_samples.png``: per task, the median best and top-10 curves of every framework
    over its seeds, with the min-max band over seeds (the series are kept beside the PNG)."""
    if "arms" not in raw:
        return {}
    n = int(raw["calls"])
    runs = _runs(raw)
    series: dict[str, dict] = {}
    for t in raw["tasks"]:
        for a in raw["arms"]:
            by_seed = runs.get((t, a))
            if not by_seed:
                continue
            cs = [curves(r["records"], n) for r in by_seed.values()]
            entry = {}
            for i, key in enumerate(("best", "top10")):
                rows = np.array([c[i] for c in cs])
                with np.errstate(all="ignore"):
                    entry[key] = {"median": _r(_median_curve(rows)), "lo": _r(np.nanmin(rows, axis=0)) if
                                  (~np.isnan(rows)).any() else [], "hi": _r(np.nanmax(rows, axis=0))}
            series.setdefault(t, {})[a] = entry
    return {PNG: {"calls": n, "tasks": series}}


def draw(png: Path, data: dict) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _plots import draw_task_grid

    draw_task_grid(png, data["tasks"], list(range(data["calls"] + 1)), label=lambda fw: NAMES.get(fw, fw),
                   title=lambda t: TASK_NAMES.get(t, t),
                   colors={"qdevolve": "tab:blue", "openevolve": "tab:orange", "shinka": "tab:green"})


def render_ablation(raw: dict) -> dict[str, str]:
    """The ablation table: every qdevolve arm of ``raw["variants"]`` (the default among them) taken in
    turn as the reference against each of ``raw["competitors"]``, with the ratio and interval of ``render``.

    Raw shape: that of ``render`` (``runs`` hold the variants' runs and the competitors' runs, copied from
    ``samples.json`` with ``raw["copied_from"]`` naming it)."""
    competitors = raw["competitors"]
    # a variant once (a resumed plan listed the default twice), and a competitor is not a variant
    variants = [v for v in dict.fromkeys(raw["variants"]) if v not in competitors]
    n = int(raw["calls"])
    runs = _runs(raw)
    best = {key: {s: curves(r["records"], n)[0] for s, r in by_seed.items()} for key, by_seed in runs.items()}
    head = ("| arm | " + " | ".join(f"{TASK_NAMES.get(t, t)}: vs {NAMES.get(c, c)}" for t in raw["tasks"]
                                     for c in competitors) + " |")
    lines = [head, "|---|" + "---|" * (len(raw["tasks"]) * len(competitors))]
    for v in variants:
        cells = []
        for t in raw["tasks"]:
            for c in competitors:
                if (t, v) not in best or (t, c) not in best:
                    cells.append("missing")
                    continue
                common = sorted(set(best[(t, v)]) & set(best[(t, c)]))
                ratio, lo, hi, *_ = ratio_interval(np.array([best[(t, v)][s] for s in common]),
                                                   np.array([best[(t, c)][s] for s in common]))
                iv = "" if math.isnan(lo) else f" ({_x(lo)} to {_x(hi)})"
                cells.append(f"{_x(ratio)}{iv}, {len(common)} seeds: {verdict(ratio, hi)}")
        lines.append(f"| {v} | " + " | ".join(cells) + " |")
    desc = "\n".join(f"- {v}: {raw['overrides'].get(v, 'the default')}" for v in variants)
    paired = _paired_against_default(raw, variants, best, n)
    meta_md = _meta_md(raw, raw.get("raw_name", "samples_ablation"))
    if raw.get("copied_from"):
        c = raw["copied_from"]
        names = ["the default" if a == raw.get("reference", "qdevolve") else NAMES.get(a, a)
                 for a in c.get("arms", [raw.get("reference", "qdevolve"), *competitors])]
        what = ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]
        what = what.replace("the default", "default", 1) if what.startswith("the default") else what
        meta_md += f" {what[0].upper() + what[1:]} runs copied from `{c['file']}` (commit `{c['commit'][:12]}`, {c['date']})."
        if "arms" in c and raw.get("reference", "qdevolve") not in c["arms"]:
            meta_md += " The default's runs are this file's own, measured with the variants."
    return {"meta": meta_md, "ablation": "\n".join(lines), "arms": desc, "paired": paired}


def _paired_against_default(raw: dict, variants: list[str], best: dict, n: int) -> str:
    """Each variant against the default on the same seeds (same server replies for the same parent and
    call): the mean over seeds of the paired difference of the best score at the budget, with its 90 %
    bootstrap interval (``_raw.bootstrap_interval``, seeds resampled) and the rule's verdict for
    "the variant ends higher" and, separately, "it ends lower"."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from _raw import bootstrap_interval
    from _raw import verdict as rule

    ref = raw.get("reference", "qdevolve")
    lines = ["| arm | task | variant minus default: best at the budget (90 % interval) | ends higher | ends lower |",
             "|---|---|---|---|---|"]
    for v in variants:
        if v == ref:
            continue
        for t in raw["tasks"]:
            if (t, v) not in best or (t, ref) not in best:
                lines.append(f"| {v} | {TASK_NAMES.get(t, t)} | missing | | |")
                continue
            common = sorted(set(best[(t, v)]) & set(best[(t, ref)]))
            iv = bootstrap_interval([float(best[(t, v)][s][n - 1] - best[(t, ref)][s][n - 1]) for s in common])
            lines.append(f"| {v} | {TASK_NAMES.get(t, t)} | {iv.text('{:+.4g}')} | "
                         f"{rule(iv, 0.0, 'greater')} | {rule(iv, 0.0, 'less')} |")
    return "\n".join(lines)


def _rewrite(text: str, kind: str, name: str, blocks: dict[str, str]) -> str:
    for key, body in blocks.items():
        pat = re.compile(rf"(<!-- {kind}:{re.escape(name)}:{re.escape(key)} -->)(.*?)(<!-- /{kind} -->)", re.S)
        sep = "\n" if kind == "report" else ""
        text = pat.sub(lambda m, b=sep + body + sep: m.group(1) + b + m.group(3), text)
    return text


def main() -> None:
    root = Path(__file__).resolve().parents[2]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--name", default="samples", choices=["samples", "samples_ablation"])
    ap.add_argument("--raw", type=Path, help="default: benchmarks/results/NAME.json")
    ap.add_argument("--write", action="store_true", help="rewrite NAME's blocks in BENCHMARKS.md (and README.md)")
    a = ap.parse_args()
    raw = json.loads((a.raw or root / "benchmarks" / "results" / f"{a.name}.json").read_text())
    out = render(raw) if a.name == "samples" else render_ablation(raw)
    for key, body in out.items():
        print(f"## {key}\n\n{body}\n")
    if a.write:
        tables = {k: v for k, v in out.items() if k != "summary"}
        path = root / "BENCHMARKS.md"
        path.write_text(_rewrite(path.read_text(), "report", a.name, tables))
        if "summary" in out:
            path = root / "README.md"
            path.write_text(_rewrite(path.read_text(), "figure", a.name, {"summary": out["summary"]}))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
