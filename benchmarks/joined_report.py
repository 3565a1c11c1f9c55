"""The tables of ``benchmarks/bench_joined.py``: means ± sd over seeds of one report."""

from __future__ import annotations

import math
import statistics
import subprocess
from typing import Any

__all__ = ["DIVERSITY_ARMS", "render", "uptime"]

DIVERSITY_ARMS = ("ips", "rare")


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "n/a"


def _ms(values: list[float], digits: int = 1) -> str:
    if not values:
        return "n/a"
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):.{digits}f} ± {sd:.{digits}f}"


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def render(report: dict[str, Any]) -> str:
    """Markdown tables of a report (means ± standard deviation over seeds)."""
    args = report["args"]
    ok = [r for r in report["runs"] if "error" not in r]
    by_arm: dict[str, list[dict[str, Any]]] = {}
    for r in ok:
        by_arm.setdefault(r["arm"], []).append(r)
    seeds = ",".join(str(s) for s in report["seeds"])
    cmd = (f"python benchmarks/bench_joined.py --samples {args['samples']} --checkpoints {args['checkpoints']} "
           f"--seeds {seeds} --every {args['every']} "
           f"--lr {args['lr']} --group {args['group']} --bases {args['bases']} --jobs {args['jobs']}"
           + (" --no-shaping" if args.get("no_shaping") else "")
           + ("" if args.get("reward") is None else f" --reward {args['reward']}"))
    load = "/".join(f"{x:.1f}" for x in report.get("load_start", []))
    load_end = "/".join(f"{x:.1f}" for x in report.get("load_end", []))
    lines = [f"Command: `{cmd}` ({report['date']}).", "",
             f"Wall time {report['wall_s']:.0f} s and {report.get('cpu_s', float('nan')):.0f} CPU seconds for "
             f"{len(ok)} runs (+{report['base_build_s']:.0f} s building or loading the cached bases); load average "
             f"(1/5/15 min) {load} at the start, {load_end} at the end.", ""]
    failed = [r for r in report["runs"] if "error" in r]
    for r in failed:
        lines.append(f"* FAILED: {r['arm']} seed {r['seed']}: {r['error']}")
    checkpoints = ok[0]["checkpoints"] if ok else []
    head = ["arm", *[f"top-50 mean @{c} evals" for c in checkpoints]]
    lines += ["Mean score of the top 50 programs at fixed evaluation counts (an arm that evaluated fewer keeps "
              "its final value):", "", _row(head), "|" + "---|" * len(head)]
    for arm, rs in by_arm.items():
        lines.append(_row([arm] + [_ms([r["curves"]["top50"][i] for r in rs], 3) for i in range(len(checkpoints))]))
    rewards = report.get("rewards", {})
    head = ["arm", "reward", *[f"correct cells @{c}" for c in checkpoints], "distinct correct", "semantic classes", "best",
            "samples", "evaluations", "copies (rollouts)", "trainer steps", "pass@1 first → last version"]
    lines += ["", "Archive cells holding a correct program against evaluations, and the end state (same number "
              "of samples per arm; copies of stored programs are rollouts, not evaluations):", "",
              _row(head), "|" + "---|" * len(head)]
    for arm, rs in by_arm.items():
        first = [r["pass1"][min(r["pass1"], key=int)] for r in rs]
        last = [r["pass1"][max(r["pass1"], key=int)] for r in rs]
        cells = [_ms([r["curves"]["correct_cells"][i] for r in rs]) for i in range(len(checkpoints))]
        lines.append(_row([
            arm, rewards.get(arm, "?"), *cells, _ms([r["curves"]["distinct_correct"][-1] for r in rs]),
            _ms([r["curves"]["semantic_classes"][-1] for r in rs]), _ms([r["curves"]["best"][-1] for r in rs], 2),
            _ms([r["samples"] for r in rs], 0), _ms([r["evaluations"] for r in rs], 0),
            _ms([r["copies"] for r in rs], 0), _ms([r["trainer_steps"] for r in rs], 0),
            f"{statistics.fmean(first):.3f} → {statistics.fmean(last):.3f}"]))
    for arm, why in report["skipped"].items():
        lines.append(f"| {arm} | skipped: {why} |" + " |" * (len(head) - 2))
    lines += ["", "Pass@1 of each policy version (share of its samples, copies included, whose program is "
              "correct), mean over seeds, versions 0, 1, 2, ... (every 4th shown):", ""]
    for arm, rs in by_arm.items():
        n = max(len(r["pass1"]) for r in rs)
        means = [statistics.fmean(r["pass1"][str(v)] for r in rs if str(v) in r["pass1"]) for v in range(n)
                 if any(str(v) in r["pass1"] for r in rs)]
        lines.append(f"* {arm}: " + ", ".join(f"{m:.3f}" for m in means[::4]))
    lines += ["", "Training signal per arm (means over runs): trainer step seconds, groups, rollouts per group, "
              "share of groups whose completion texts all differ, with no reward spread (zero advantage), "
              "holding a correct child; evaluations per second:", "",
              "| arm | step s | groups | rollouts per group | all texts distinct | no reward spread | any correct "
              "| evals/s |", "|---|---|---|---|---|---|---|---|"]
    for arm, rs in by_arm.items():
        dg = [r["diagnostics"] for r in rs]
        steps = [s for r in rs for s in r["step_seconds"]]
        lines.append(f"| {arm} | {statistics.fmean(steps):.3f} | " if steps else f"| {arm} | – | ")
        lines[-1] += (f"{statistics.fmean(x['groups'] for x in dg):.0f} | "
                      f"{statistics.fmean(x['mean_group_size'] for x in dg):.2f} | "
                      f"{statistics.fmean(x['all_texts_distinct'] for x in dg):.2f} | "
                      f"{statistics.fmean(x['no_reward_spread'] for x in dg):.2f} | "
                      f"{statistics.fmean(x['any_correct'] for x in dg):.2f} | "
                      f"{statistics.fmean(r['evaluations'] / r['wall_s'] for r in rs):.1f} |")
    lines += ["", "Claim under test: each diversity-preserving arm (" + ", ".join(DIVERSITY_ARMS) +
              ") ends with >= 1.3x GRPO's correct cells and >= the frozen base's.", ""]

    def final_cells(arm: str) -> float | None:
        rs = by_arm.get(arm)
        return statistics.fmean(r["curves"]["correct_cells"][-1] for r in rs) if rs else None

    grpo, frozen = final_cells("grpo"), final_cells("frozen base")
    for arm in DIVERSITY_ARMS:
        v = final_cells(arm)
        if v is None or grpo is None or frozen is None:
            lines.append(f"* {arm}: not measured")
            continue
        held = v >= 1.3 * grpo and v >= frozen
        ratio = v / grpo if grpo else math.inf
        lines.append(f"* {arm}: {v:.1f} correct cells vs GRPO {grpo:.1f} ({ratio:.2f}x) and frozen base "
                     f"{frozen:.1f}: {'holds' if held else 'FAILS'}")
    check = report["operator_check"]
    lines += ["", f"The base as a mutation operator (64 samples per parent; mean total-variation distance "
              f"between the child distributions of two parents: {check['mean_tv_between_parents']:.2f}):", "",
              "| parent | valid | equal to parent | correct | distinct of 64 | most frequent children |",
              "|---|---|---|---|---|---|"]
    for row in check["rows"]:
        lines.append(f"| `{row['parent']}` | {row['valid']:.2f} | {row['equal_parent']:.2f} | {row['correct']:.2f} "
                     f"| {row['distinct']} | {row['top']} |")
    return "\n".join(lines) + "\n"
