"""Tables of the diversity benchmark (``benchmarks/bench_diversity.py``) from
``benchmarks/results/diversity_few_answer.json``: final metrics per arm at equal steps (mean ± sd
over seeds), the budget per arm, metrics at equal pass@1 and the targets; and the README's
effective-answers figure. Computed with the benchmark's own ``summarize``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import bench_diversity as bd  # noqa: E402
from _raw import bootstrap_interval, verdict  # noqa: E402

RAW_NAMES = ("diversity_few_answer",)
COLS = {"main": ["pass@1", "effK", "top", "modes", "pass@4", "pass@256"],
        "hard": ["pass@1", "pass@4", "pass@16", "pass@64", "pass@256", "effK"]}


def _fmt(v: tuple[float, float], digits: int = 2) -> str:
    return f"{v[0]:.{digits}f} ± {v[1]:.{digits}f}"


def render(raw: dict[str, Any]) -> dict[str, str]:
    s = bd.summarize(raw)
    out: dict[str, str] = {}
    for variant in bd.VARIANTS:
        v = s[variant]
        cols = COLS[variant]
        for split, tag in (("train", "train"), ("held_out", "test")):
            lines = ["| arm | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
            for arm, row in v["table"].items():
                lines.append(f"| {arm} | " + " | ".join(_fmt(row[f"{split}/{c}"], 3 if "pass" in c else 2)
                                                     for c in cols) + " |")
            out[f"{variant}-{tag}"] = "\n".join(lines)
        lines = ["| arm | samples drawn | groups trained / sampled | optimiser passes per batch | "
                 "mean training reward | s per trainer step |", "|---|---|---|---|---|---|"]
        for arm, b in v["budget"].items():
            lines.append(f"| {arm} | {b['samples']:.0f} | {b['groups']:.0f} / {b['of']:.0f} | {b['passes']:.0f} | "
                         f"{b['reward']:.3f} | {b['step_s']:.3f} |")
        out[f"{variant}-budget"] = "\n".join(lines)
        if v["equal_pass1_level"] is not None:
            lines = [f"At equal pass@1 = {v['equal_pass1_level']:.3f} (trained prompts). The level is the lowest "
                     "final pass@1 among the arms that end above the base; each run is read at the first "
                     "evaluation where it reaches the level (interpolated).", "",
                     "| arm | runs reaching it | step | effK | top | modes | pass@256 |",
                     "|---|---|---|---|---|---|---|"]
            for arm, e in v["equal_pass1"].items():
                if e.get("effK") is None:
                    lines.append(f"| {arm} | {e['reached']}/{e['of']} | | | | | |")
                    continue
                lines.append(f"| {arm} | {e['reached']}/{e['of']} | {_fmt(e['step'], 0)} | {_fmt(e['effK'])} | "
                             f"{_fmt(e['top'])} | {_fmt(e['modes'])} | {_fmt(e['pass@256'], 3)} |")
            out[f"{variant}-equal"] = "\n".join(lines)
    out["targets"] = targets(raw)
    out["reading"] = reading(s)
    out["reading-more"] = reading_more(raw, s)
    out["time"] = time_sentence(raw)
    main = s["main"]["table"]
    n = main["base"]["seeds"]
    grpo, ips = _per_seed(raw, "grpo", "effK"), _per_seed(raw, "ips", "effK")
    g = bootstrap_interval([grpo[k] for k in sorted(grpo)])
    i = bootstrap_interval([ips[k] for k in sorted(ips)])
    out["effk"] = (f"effective answers {g.text()} (grpo) and {i.text()} (ips) against the base's "
                   f"{main['base']['train/effK'][0]:.2f} (mean over {n} seeds, bootstrap interval over seeds)")
    return out


def reading(s: dict[str, Any]) -> str:
    """The numbers the hand-written reading rests on, as sentences computed from the summary (main
    variant, trained prompts, means over seeds): collapse of GRPO, what IPS keeps, the other arms'
    range and Rare against its target."""
    t, eq = s["main"]["table"], s["main"]["equal_pass1"]

    def m(arm: str, key: str) -> float:
        return t[arm][f"train/{key}"][0]

    parts = [f"On the trained prompts GRPO raises pass@1 from {m('base', 'pass@1'):.2f} to {m('grpo', 'pass@1'):.2f} "
             f"while the effective number of correct answers falls from {m('base', 'effK'):.2f} to "
             f"{m('grpo', 'effK'):.2f} (top answer {100 * m('grpo', 'top'):.0f} %)."]
    if "ips" in t:
        text = (f"IPS keeps effK {m('ips', 'effK'):.2f} ({m('ips', 'effK') / m('grpo', 'effK'):.1f}x GRPO's) with "
                f"pass@1 {m('ips', 'pass@1') - m('base', 'pass@1'):+.2f} over the base")
        level = s["main"]["equal_pass1_level"]
        if level is not None and eq.get("ips", {}).get("effK") and eq.get("grpo", {}).get("effK"):
            text += (f"; at equal pass@1 ({level:.3f}) it holds effK {eq['ips']['effK'][0]:.2f} against GRPO's "
                     f"{eq['grpo']['effK'][0]:.2f}")
        parts.append(text + ".")
    others = [a for a in t if a not in ("base", "grpo", "ips")]
    if others:
        lo = min(others, key=lambda a: m(a, "effK"))
        hi = max(others, key=lambda a: m(a, "effK"))
        gain = {a: m(a, "pass@1") - m("base", "pass@1") for a in others}
        parts.append(f"The other objectives ({', '.join(others)}) end at effK {m(lo, 'effK'):.2f} ({lo}) to "
                     f"{m(hi, 'effK'):.2f} ({hi}); their pass@1 gains over the base range from "
                     f"{min(gain.values()):+.2f} ({min(gain, key=gain.get)}) to {max(gain.values()):+.2f} "
                     f"({max(gain, key=gain.get)}).")
    if "rare" in t:
        text = (f"Rare ends at effK {m('rare', 'effK'):.2f} against the {2 * m('grpo', 'effK'):.2f} its target asks "
                f"(2x GRPO's), with pass@1 {m('rare', 'pass@1') - m('base', 'pass@1'):+.2f}")
        if eq.get("rare", {}).get("effK") and eq.get("grpo", {}).get("effK"):
            text += f"; at equal pass@1 its effK is {eq['rare']['effK'][0]:.2f} against GRPO's {eq['grpo']['effK'][0]:.2f}"
        parts.append(text + ".")
    return " ".join(parts)


def reading_more(raw: dict[str, Any], s: dict[str, Any]) -> str:
    """Computed sentences for LAD's stability, the held-out prompts and the hard variant's pass@k
    crossover (the first k at which the base's mean pass@k exceeds GRPO's)."""
    t, hard = s["main"]["table"], s.get("hard", {}).get("table", {})
    base_p1 = _per_seed(raw, "base", "pass@1")
    parts = []
    if "lad" in t:
        lad = _per_seed(raw, "lad", "pass@1")
        below = sorted(v for k, v in lad.items() if v < base_p1.get(k, -1))
        b = s["main"]["budget"]
        parts.append(f"LAD: {len(below)} of {len(lad)} seeds end below the base's pass@1"
                     + (f" ({', '.join(f'{v:.2f}' for v in below)})" if below else "")
                     + f"; mean {t['lad']['train/pass@1'][0]:.2f} ± {t['lad']['train/pass@1'][1]:.2f}, effK "
                     f"{t['lad']['train/effK'][0]:.2f}; {b['lad']['step_s']:.2f} s per trainer step against GRPO's "
                     f"{b['grpo']['step_s']:.2f}.")
    if "grpo" in t:
        text = (f"Held-out prompts: GRPO's pass@1 goes from the base's {t['base']['held_out/pass@1'][0]:.2f} to "
                f"{t['grpo']['held_out/pass@1'][0]:.2f} and its effK from {t['base']['held_out/effK'][0]:.2f} to "
                f"{t['grpo']['held_out/effK'][0]:.2f}")
        if "ips" in t:
            text += (f"; IPS keeps held-out effK {t['ips']['held_out/effK'][0]:.2f} and pass@4 "
                     f"{t['ips']['held_out/pass@4'][0]:.2f} (GRPO {t['grpo']['held_out/pass@4'][0]:.2f})")
        losers = [a for a in t if a != "base" and t[a]["held_out/pass@1"][0] < t["base"]["held_out/pass@1"][0]]
        worst = min(t, key=lambda a: t[a]["held_out/pass@1"][0])
        text += (f"; {len(losers)} of {len(t) - 1} trained arms lose held-out pass@1, {worst} most "
                 f"({t[worst]['held_out/pass@1'][0]:.2f}).")
        parts.append(text)
    if hard and "grpo" in hard:
        ks = [int(c.split("@")[1]) for c in COLS["hard"] if c.startswith("pass@")]
        trained = [a for a in hard if a != "base"]
        p1 = [hard[a]["train/pass@1"][0] for a in trained]
        for split, name in (("train", "trained"), ("held_out", "held-out")):
            cross = next((k for k in ks if hard["base"][f"{split}/pass@{k}"][0] > hard["grpo"][f"{split}/pass@{k}"][0]),
                         None)
            p256 = [hard[a][f"{split}/pass@256"][0] for a in trained]
            parts.append(
                f"Hard, {name} prompts: base pass@64 {hard['base'][f'{split}/pass@64'][0]:.2f} and pass@256 "
                f"{hard['base'][f'{split}/pass@256'][0]:.2f}, GRPO {hard['grpo'][f'{split}/pass@64'][0]:.2f} and "
                f"{hard['grpo'][f'{split}/pass@256'][0]:.2f}; "
                + (f"the base passes GRPO from k = {cross} on" if cross else "the base never passes GRPO")
                + f"; trained arms' pass@256 {min(p256):.2f}-{max(p256):.2f}"
                + (f", their pass@1 {min(p1):.2f}-{max(p1):.2f} (base {hard['base']['train/pass@1'][0]:.2f})."
                   if split == "train" else "."))
        eqh = s["hard"]["equal_pass1"]
        effs = [e["effK"][0] for e in eqh.values() if e.get("effK")]
        if effs and s["hard"]["equal_pass1_level"] is not None:
            parts.append(f"At equal pass@1 ({s['hard']['equal_pass1_level']:.3f}) on the hard prompts every arm's effK "
                         f"is {min(effs):.2f}-{max(effs):.2f}.")
    return " ".join(parts)


def time_sentence(raw: dict[str, Any]) -> str:
    """CPU and wall time of the run that wrote the raw file, from its meta (``cpu_seconds``: user +
    system time of the benchmark and its workers; ``seconds``: wall)."""
    m = raw["meta"]
    if "cpu_seconds" not in m or "seconds" not in m:
        return "(CPU and wall time not recorded in this raw file)"
    runs = len(raw["runs"])
    cpu, wall = m["cpu_seconds"], m["seconds"]
    load = ""
    if m.get("loadavg_start") and m.get("loadavg"):
        load = f", while the 1-minute load average went from {m['loadavg_start'][0]:.1f} to {m['loadavg'][0]:.1f}"
    return (f"{cpu:.0f} CPU seconds in all for {runs} runs and their bases (about {cpu / 2 / 60:.1f} minutes on "
            f"2 idle cores); the wall time was {wall:.0f} s ({wall / 60:.1f} min) with {m.get('jobs', 1)} workers"
            f"{load}.")


def _per_seed(raw: dict[str, Any], arm: str, key: str, variant: str = "main") -> dict[int, float]:
    return {r["seed"]: r["curve"][-1]["train"][key] for r in raw["runs"] if r["variant"] == variant and r["arm"] == arm}


def targets(raw: dict[str, Any]) -> str:
    """The benchmark's targets (main variant, trained prompts), each judged by the 90 % bootstrap
    interval over seeds of its per-seed margin (paired by seed): e.g. ``effK(ips) - 2 effK(grpo) > 0``."""
    grpo, base = _per_seed(raw, "grpo", "effK"), _per_seed(raw, "base", "pass@1")
    rows = [("GRPO collapses: effK <= 1.5 (train prompts)", "GRPO effK", [grpo[s] for s in sorted(grpo)], 1.5,
             "less")]
    for arm in ("ips", "rare"):
        eff, p1 = _per_seed(raw, arm, "effK"), _per_seed(raw, arm, "pass@1")
        if not eff:
            continue
        seeds = sorted(set(eff) & set(grpo))
        rows.append((f"{arm}: effK >= 2x GRPO's", f"effK({arm}) - 2 effK(grpo)",
                     [eff[s] - 2 * grpo[s] for s in seeds], 0.0, "greater"))
        seeds = sorted(set(p1) & set(base))
        rows.append((f"{arm}: pass@1 gain >= 0.1 over the base", f"pass@1({arm}) - pass@1(base)",
                     [p1[s] - base[s] for s in seeds], 0.1, "greater"))
    lines = ["| target | per-seed statistic | mean over seeds (90 % bootstrap interval) | verdict |",
             "|---|---|---|---|"]
    for what, stat, values, null, direction in rows:
        iv = bootstrap_interval(values)
        lines.append(f"| {what} | {stat} {'<' if direction == 'less' else '>'} {null:g} | "
                     f"{iv.text('{:+.2f}' if null == 0 else '{:.2f}')} | {verdict(iv, null, direction)} |")
    return "\n".join(lines)
