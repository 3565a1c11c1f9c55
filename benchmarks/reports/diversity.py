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
    main = s["main"]["table"]
    n = main["base"]["seeds"]
    grpo, ips = _per_seed(raw, "grpo", "effK"), _per_seed(raw, "ips", "effK")
    g = bootstrap_interval([grpo[k] for k in sorted(grpo)])
    i = bootstrap_interval([ips[k] for k in sorted(ips)])
    out["effk"] = (f"effective answers {g.text()} (grpo) and {i.text()} (ips) against the base's "
                   f"{main['base']['train/effK'][0]:.2f} (mean over {n} seeds, bootstrap interval over seeds)")
    return out


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
