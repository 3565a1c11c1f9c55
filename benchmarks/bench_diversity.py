"""Diversity benchmark: does an objective keep several correct answers while raising pass@1?

Task ``few_answer`` (:mod:`qdevolve.rl.tasks.few_answer`): two-digit answers to residue
prompts with 4-8 correct answers each, and a tiny GPT-2 base pre-trained on a Zipf-skewed
corpus (the favourite correct answer of a prompt holds about 40 % of the correct draws), so a
group of G = 8 holds repeated correct answers and GRPO's rich-get-richer drift has a
favourite to amplify. Every metric is exact: the probabilities of a prompt's few correct
answers are scored directly, so

* ``pass@1 = sum_{a correct} p(a)`` and ``pass@k = 1 - (1 - pass@1)^k``;
* ``effK = exp(H(q))``, ``q = p / pass@1`` over the correct answers: the effective number of
  correct answers (1 = one answer, n = uniform over n);
* ``top`` = the share of the top correct answer in the correct mass;
* ``modes`` = correct answers above 2 % of the correct mass.

Two variants share the per-seed bases: ``main`` trains on 16 main prompts (base pass@1 about
0.75, effK about 4.2) and also measures 8 held-out main prompts (pre-trained, never trained
on); ``hard`` trains on 12 hard prompts (2-4 answers, base pass@1 about 0.05; 6 held out) for
the pass@k crossover of Yue et al. 2025 (arXiv 2504.13837). Each seed pre-trains its own base (its own init and
corpus draws), cached under ``~/.cache/qdevolve/bench_diversity/<task settings hash>``.

Every arm gets the same budget: ``steps`` updates of 8 prompts x G = 8 completions (64
samples) with binary rewards, AdamW at ``lr``, one optimiser pass per batch, the trainer's
default ``grpo`` loss aggregation. ``reinforce_rej`` trains on the groups its filter keeps
(as published; the samples drawn are the same). Arms: ``grpo``, ``ips`` (outcome = the
answer), ``rare`` (cluster = the answer, counted among correct completions, positive
advantages weighted), ``reinforce_rej``, ``passk`` (k = 4), ``entropic`` (TTT-Discover),
``lad`` (JS, 1/eta = 4, with the mu = 4 optimiser passes over each batch its brake needs: the
same samples, four times the optimiser steps, stated in the budget table). ``vpo`` is not an
arm (an answer here is one candidate with one test, so its set reward is GRPO's) and neither
is ``es`` (a parameter-space update whose samples are greedy evaluations of perturbed models).
Comparisons are made at equal steps (the end) and at equal pass@1: the level is the lowest
final pass@1 among the arms that end above the base, and each run is read at the first
evaluation where it reaches it (metrics interpolated between evaluations).

Usage::

    python benchmarks/bench_diversity.py                       # default budget, report
    python benchmarks/bench_diversity.py --seeds 2 --steps 30   # a quick look
    python benchmarks/bench_diversity.py --report               # rebuild the report only
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
OUT_JSON = RESULTS / "diversity_few_answer.json"
OUT_MD = RESULTS / "diversity.md"
KS = (1, 4, 16, 64, 256)
G = 8
PROMPTS_PER_STEP = 8

ARMS: dict[str, dict[str, Any]] = {
    "grpo": {"type": "grpo"},
    "ips": {"type": "ips", "alpha": 1.0},
    "rare": {"type": "rare", "alpha": 1.0},
    "reinforce_rej": {"type": "reinforce_rej"},
    "passk": {"type": "passk", "k": 4},
    "entropic": {"type": "entropic"},
    "lad": {"type": "lad"},
}
# mean-field drift rows: the benchmark's arms plus the other readings of Rare
DRIFT_ARMS: dict[str, dict[str, Any]] = {
    "grpo": ARMS["grpo"],
    "ips": ARMS["ips"],
    "rare": ARMS["rare"],
    "rare (all signs, all counted)": {"type": "rare", "alpha": 1.0, "apply_to": "all", "count": "all"},
    "rare (alpha = 3)": {"type": "rare", "alpha": 3.0},
}
VARIANTS = {"main": ("train", "test"), "hard": ("hard_train", "hard_test")}
TASK_SETTINGS: dict[str, Any] = {}  # FewAnswerTask defaults
TINY_SETTINGS: dict[str, Any] = {"sft_steps": 1500, "lr": 3e-3}


def cache_dir() -> Path:
    """Base-policy cache keyed by the task's and the builder's settings."""
    from qdevolve.rl.tasks import get_task

    task = get_task("few_answer", **TASK_SETTINGS)
    key = json.dumps({"task": {k: v for k, v in vars(task).items()}, "tiny": TINY_SETTINGS}, sort_keys=True,
                     default=str)
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return Path.home() / ".cache" / "qdevolve" / "bench_diversity" / digest


def build_base(seed: int) -> float:
    """Build (or find) seed ``seed``'s base policy; returns the seconds spent."""
    import torch

    from qdevolve.rl.tiny import tiny_policy_dir

    torch.set_num_threads(1)
    t0 = time.perf_counter()
    tiny_policy_dir("few_answer", cache_dir(), seed=seed, **TINY_SETTINGS)
    return time.perf_counter() - t0


# ----------------------------------------------------------------------------- metrics
def exact_metrics(task: Any, model: Any, tok: Any, prompts: list[str]) -> dict[str, float]:
    """Mean over prompts of the exact metrics (module docstring)."""
    from qdevolve.rl.metrics import effective_outcomes, modes_above, top_share
    from qdevolve.rl.sampling import answer_logprobs

    rows = []
    for p in prompts:
        probs = answer_logprobs(model, tok, p, task.correct_answers(p)).exp().numpy()
        p1 = float(probs.sum())
        rows.append([p1, effective_outcomes(probs), top_share(probs), modes_above(probs, 0.02),
                     *(1.0 - (1.0 - p1) ** k for k in KS[1:])])
    mean = np.asarray(rows).mean(0)
    names = ["pass@1", "effK", "top", "modes", *(f"pass@{k}" for k in KS[1:])]
    return {n: float(v) for n, v in zip(names, mean, strict=True)}


# ----------------------------------------------------------------------------- one run
def run_one(arm: str, variant: str, seed: int, steps: int, lr: float, eval_every: int) -> dict[str, Any]:
    """Train one arm on one variant from seed ``seed``'s base; returns its curve."""
    import torch

    from qdevolve import registry
    from qdevolve.rl.config import TrainerConfig
    from qdevolve.rl.objectives import entropic  # noqa: F401  (registered before its entry point is installed)
    from qdevolve.rl.tasks import get_task
    from qdevolve.rl.tasks.runner import make_groups
    from qdevolve.rl.tiny import load_tiny_policy
    from qdevolve.rl.trainer import PolicyTrainer

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    t0 = time.perf_counter()
    task = get_task("few_answer", **TASK_SETTINGS)
    train_split, test_split = VARIANTS[variant]
    train_prompts, test_prompts = task.prompts(train_split), task.prompts(test_split)
    model, tok = load_tiny_policy("few_answer", cache_dir(), seed=seed, **TINY_SETTINGS)

    def point(step: int) -> dict[str, Any]:
        return {"step": step, "train": exact_metrics(task, model, tok, train_prompts),
                "held_out": exact_metrics(task, model, tok, test_prompts)}

    curve = [point(0)]
    if arm == "base":
        return {"arm": arm, "variant": variant, "seed": seed, "curve": curve, "seconds": time.perf_counter() - t0}
    obj = registry.objective.create(ARMS[arm])
    trainer = PolicyTrainer(model, tok, obj, TrainerConfig(learning_rate=lr, max_completion_length=task.max_new_tokens,
                                                           seed=seed))
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)
    step_seconds, kept, reward = [], 0, []
    select = getattr(obj, "select_groups", None)
    for step in range(steps):
        batch = [train_prompts[i] for i in rng.choice(len(train_prompts), PROMPTS_PER_STEP, replace=False)]
        groups = make_groups(task, model, tok, batch, G, generator=gen, outcome_key="outcome",
                             cluster_key="outcome", step=step, binary=True)
        reward.append(float(np.mean([g.rewards.mean() for g in groups])))
        if select is not None:
            groups = select(groups)
        kept += len(groups)
        if groups:
            t1 = time.perf_counter()
            trainer.step(groups)
            step_seconds.append(time.perf_counter() - t1)
        if (step + 1) % eval_every == 0 or step + 1 == steps:
            curve.append(point(step + 1))
    return {"arm": arm, "variant": variant, "seed": seed, "curve": curve, "groups_trained": kept,
            "groups_sampled": steps * PROMPTS_PER_STEP, "samples": steps * PROMPTS_PER_STEP * G,
            "optimiser_passes": int(trainer.num_iterations), "train_reward": reward,
            "step_seconds": float(np.mean(step_seconds)) if step_seconds else 0.0,
            "seconds": time.perf_counter() - t0}


# ----------------------------------------------------------------------------- analysis
def _final(run: dict[str, Any], split: str, key: str) -> float:
    return run["curve"][-1][split][key]


def at_pass1(run: dict[str, Any], level: float, split: str = "train") -> dict[str, float] | None:
    """Metrics at the first evaluation where pass@1 reaches ``level`` (linear interpolation)."""
    pts = run["curve"]
    for a, b in zip(pts, pts[1:], strict=False):
        pa, pb = a[split]["pass@1"], b[split]["pass@1"]
        if pa < level <= pb:
            t = (level - pa) / (pb - pa)
            return {k: a[split][k] + t * (b[split][k] - a[split][k]) for k in a[split]} | {
                "step": a["step"] + t * (b["step"] - a["step"])}
    if pts[0][split]["pass@1"] >= level:
        return dict(pts[0][split]) | {"step": 0.0}
    return None


def summarize(results: dict[str, Any]) -> dict[str, Any]:
    """Means, spreads, equal-pass@1 rows and the target checks."""
    out: dict[str, Any] = {}
    for variant in VARIANTS:
        runs = [r for r in results["runs"] if r["variant"] == variant]
        arms = list(dict.fromkeys(r["arm"] for r in runs))
        table: dict[str, Any] = {}
        for arm in arms:
            rs = [r for r in runs if r["arm"] == arm]
            row: dict[str, Any] = {"seeds": len(rs)}
            for split in ("train", "held_out"):
                for key in rs[0]["curve"][-1][split]:
                    vals = [_final(r, split, key) for r in rs]
                    row[f"{split}/{key}"] = (float(np.mean(vals)), float(np.std(vals)))
            table[arm] = row
        trained = [a for a in arms if a != "base"]
        # the lowest final pass@1 among the arms that end above the base (an arm that ends
        # below the base would put the level under the base, where every run starts)
        floor = table["base"]["train/pass@1"][0] if "base" in table else -np.inf
        gaining = [table[a]["train/pass@1"][0] for a in trained if table[a]["train/pass@1"][0] > floor]
        level = min(gaining) if gaining else None
        eq: dict[str, Any] = {}
        if level is not None:
            for arm in trained:
                pts = [at_pass1(r, level) for r in runs if r["arm"] == arm]
                got = [p for p in pts if p is not None]
                eq[arm] = {"reached": len(got), "of": len(pts)} | ({
                    k: (float(np.mean([p[k] for p in got])), float(np.std([p[k] for p in got])))
                    for k in ("effK", "top", "modes", "step", "pass@256")} if got else {})
        budget: dict[str, Any] = {}
        for arm in trained:
            rs = [r for r in runs if r["arm"] == arm]
            budget[arm] = {"samples": float(np.mean([r.get("samples", r["groups_sampled"] * G) for r in rs])),
                           "groups": float(np.mean([r["groups_trained"] for r in rs])),
                           "of": float(np.mean([r["groups_sampled"] for r in rs])),
                           "passes": float(np.mean([r.get("optimiser_passes", 1) for r in rs])),
                           "reward": float(np.mean([np.mean(r["train_reward"]) for r in rs])),
                           "step_s": float(np.mean([r["step_seconds"] for r in rs]))}
        out[variant] = {"table": table, "equal_pass1_level": level, "equal_pass1": eq, "budget": budget}
    main = out["main"]["table"]
    checks = []
    if {"grpo", "base"} <= set(main):
        g_eff = main["grpo"]["train/effK"][0]
        checks.append(("GRPO collapses: effK <= 1.5 (train prompts)", f"{g_eff:.2f}", g_eff <= 1.5))
        for arm in ("ips", "rare"):
            if arm in main:
                eff, p1 = main[arm]["train/effK"][0], main[arm]["train/pass@1"][0]
                d = p1 - main["base"]["train/pass@1"][0]
                checks.append((f"{arm}: effK >= 2x GRPO's", f"{eff:.2f} vs 2 x {g_eff:.2f} = {2 * g_eff:.2f}",
                               eff >= 2 * g_eff))
                checks.append((f"{arm}: pass@1 gain >= 0.1 over the base", f"{d:+.3f}", d >= 0.1))
    out["checks"] = checks
    return out


def mean_field_drift(pass1: float, n_correct: int = 5, groups: int = 20000,
                     seed: int = 0) -> dict[str, tuple[list[float], float]]:
    """Expected per-group logit change of each outcome for a tabular softmax, per objective.

    The base of the benchmark in miniature: ``n_correct`` correct answers with Zipf(1) shares
    of the correct mass ``pass1`` and one wrong outcome. For a softmax over outcomes the logit
    gradient of one group is ``dz_k = sum_i A_i (1[o_i = k] - p_k)``; its mean over
    ``groups`` sampled groups of G = 8 says which way each objective moves the favourite
    relative to the rarest correct answer (positive: rich get richer). Also returned: the mean
    sum of a group's advantages, ``S``; the term ``-p_k S`` of ``dz_k`` lifts every outcome in
    proportion to its probability when ``S < 0`` (a rich-get-richer term of its own).
    """
    from qdevolve import registry
    from qdevolve.rl import RolloutGroup

    rng = np.random.default_rng(seed)
    q = 1.0 / np.arange(1, n_correct + 1)
    p = np.append(pass1 * q / q.sum(), 1.0 - pass1)
    r = np.append(np.ones(n_correct), 0.0)
    out = {}
    draws = rng.choice(n_correct + 1, size=(groups, G), p=p)
    for name, spec in DRIFT_ARMS.items():
        obj = registry.objective.create(spec)
        drift, total = np.zeros(n_correct + 1), 0.0
        for o in draws:
            keys = [str(i) for i in o]
            a = obj.advantages(RolloutGroup(r[o], outcome_keys=keys, cluster_keys=keys))
            drift += np.bincount(o, weights=a, minlength=n_correct + 1) - a.sum() * p
            total += float(a.sum())
        out[name] = ((drift / groups).tolist(), total / groups)
    return out


def _fmt(v: tuple[float, float], digits: int = 2) -> str:
    return f"{v[0]:.{digits}f} ± {v[1]:.{digits}f}"


def report(results: dict[str, Any]) -> str:
    s = summarize(results)
    meta = results["meta"]
    n_seeds = len(meta["seeds"]) if isinstance(meta["seeds"], list) else meta["seeds"]  # a list since _raw.py
    lines = ["# Diversity benchmark (`benchmarks/bench_diversity.py`)", "",
             f"Task `few_answer`; {n_seeds} seeds, each with its own pre-trained base; {meta['steps']} updates "
             f"x {PROMPTS_PER_STEP} prompts x G = {G} (64 samples per update, binary rewards) for every arm; AdamW "
             f"lr {meta['lr']}; exact metrics (mean ± std over seeds). Wall time {meta['seconds']:.0f} s with "
             f"{meta['jobs']} worker processes (load before the run: {meta['uptime']}; after: "
             f"{meta.get('uptime_after', '?')}); {meta['cpu_seconds']:.0f} CPU seconds in all (workers and "
             f"parent), i.e. about {meta['cpu_seconds'] / 2 / 60:.1f} min on 2 idle cores; building the uncached "
             f"bases took {meta['base_seconds']:.0f} s of worker time (summed over workers; 0 when every base "
             f"is cached).", ""]
    for variant, (tr, te) in VARIANTS.items():
        v = s[variant]
        cols = (["pass@1", "effK", "top", "modes", "pass@4", "pass@256"] if variant == "main" else
                ["pass@1", "pass@4", "pass@16", "pass@64", "pass@256", "effK"])
        for split, label in (("train", f"{variant}: trained prompts ({tr})"),
                             ("held_out", f"{variant}: held-out prompts ({te})")):
            lines += [f"## {label}, at equal steps", "", "| arm | " + " | ".join(cols) + " |",
                      "|---|" + "---|" * len(cols)]
            for arm, row in v["table"].items():
                lines.append(f"| {arm} | " + " | ".join(_fmt(row[f'{split}/{c}'], 3 if 'pass' in c else 2)
                                                     for c in cols) + " |")
            lines.append("")
        lines += [f"## {variant}: budget per arm (means over seeds)", "",
                  "| arm | samples drawn | groups trained / sampled | optimiser passes per batch | "
                  "mean training reward | s per trainer step |", "|---|---|---|---|---|---|"]
        for arm, b in v.get("budget", {}).items():
            lines.append(f"| {arm} | {b['samples']:.0f} | {b['groups']:.0f} / {b['of']:.0f} | {b['passes']:.0f} | "
                         f"{b['reward']:.3f} | {b['step_s']:.3f} |")
        lines.append("")
        if v["equal_pass1_level"] is not None:
            lines += [f"## {variant}: at equal pass@1 = {v['equal_pass1_level']:.3f} (trained prompts)", "",
                      "The level is the lowest final pass@1 among the arms that end above the base; each run "
                      "is read at the first evaluation where it reaches the level (interpolated).", "",
                      "| arm | runs reaching it | step | effK | top | modes | pass@256 |", "|---|---|---|---|---|---|---|"]
            for arm, e in v["equal_pass1"].items():
                if e.get("effK") is None:
                    lines.append(f"| {arm} | {e['reached']}/{e['of']} | | | | | |")
                    continue
                lines.append(f"| {arm} | {e['reached']}/{e['of']} | {_fmt(e['step'], 0)} | {_fmt(e['effK'])} | "
                             f"{_fmt(e['top'])} | {_fmt(e['modes'])} | {_fmt(e['pass@256'], 3)} |")
            lines.append("")
    lines += ["## Why an objective keeps or loses the answers: mean-field drift", "",
              "Expected logit change per group of G = 8 for a tabular softmax at the benchmark's base in "
              "miniature (5 correct answers with Zipf(1) shares, one wrong outcome; 20,000 sampled groups; "
              "`mean_field_drift`). `fav - last` > 0 means the favourite gains on the rarest correct answer; "
              "`sum A` is the mean sum of a group's advantages (0 for GRPO and IPS).", "",
              "| pass@1 | arm | favourite | 2nd | rarest correct | wrong | fav - last | sum A |",
              "|---|---|---|---|---|---|---|---|"]
    for p1 in (0.75, 0.9):
        for arm, (d, total) in mean_field_drift(p1).items():
            lines.append(f"| {p1} | {arm} | {d[0]:+.3f} | {d[1]:+.3f} | {d[4]:+.3f} | {d[5]:+.3f} | "
                         f"{d[0] - d[4]:+.3f} | {total:+.2f} |")
    lines.append("")
    if s["checks"]:
        lines += ["## Targets (main variant, trained prompts, means over seeds)", "", "| target | measured | holds |",
                  "|---|---|---|"]
        lines += [f"| {a} | {m} | {'yes' if ok else 'NO'} |" for a, m, ok in s["checks"]]
        lines.append("")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- main
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--eval-every", type=int, default=5)
    ap.add_argument("--arms", default=",".join(ARMS), help="comma-separated subset of " + ", ".join(ARMS))
    ap.add_argument("--variants", default="main,hard")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (one torch thread each)")
    ap.add_argument("--out", default=str(OUT_JSON))
    ap.add_argument("--report", action="store_true", help="only rebuild the report from --out")
    args = ap.parse_args()
    out = Path(args.out)
    if not args.report:
        arms = [a for a in args.arms.split(",") if a]
        unknown = sorted(set(arms) - set(ARMS))
        if unknown:
            ap.error(f"unknown arm(s) {', '.join(unknown)}; known: {', '.join(ARMS)}")
        variants = [v for v in args.variants.split(",") if v]
        uptime = os.popen("uptime").read().strip()
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from _raw import machine_facts, start_meta

        started = start_meta()  # commit, dirty flag, start time and load of the code measured
        t0 = time.perf_counter()
        with ProcessPoolExecutor(args.jobs) as pool:
            # every base build first (cached ones return at once); a seed's runs go in as soon as
            # its base exists, so the workers never wait for the slowest build
            bases = {seed: pool.submit(build_base, seed) for seed in range(args.seeds)}
            pending = []
            for seed in range(args.seeds):
                bases[seed].result()
                pending += [pool.submit(run_one, arm, variant, seed, args.steps, args.lr, args.eval_every)
                            for variant in variants for arm in ["base", *arms]]
            base_seconds = sum(f.result() for f in bases.values())
            runs = []
            partial = out.with_suffix(".partial.json")
            for fut in pending:
                r = fut.result()
                runs.append(r)
                c, h = r["curve"][-1]["train"], r["curve"][-1]["held_out"]
                print(f"{r['variant']:5s} {r['arm']:14s} seed {r['seed']}: pass@1 {c['pass@1']:.3f} effK "
                      f"{c['effK']:.2f} top {c['top']:.2f} | held-out pass@1 {h['pass@1']:.3f} effK {h['effK']:.2f} "
                      f"({r['seconds']:.0f} s)", flush=True)
                partial.write_text(json.dumps({"runs": runs}))  # what is done survives an interrupted run
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        own = resource.getrusage(resource.RUSAGE_SELF)
        command = "python benchmarks/bench_diversity.py" + "".join(f" {a}" for a in sys.argv[1:])
        results = {"meta": {**started, "command": command, "machine": machine_facts(),
                            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                            "loadavg": [round(x, 2) for x in os.getloadavg()],
                            "seeds": args.seeds, "steps": args.steps, "lr": args.lr, "eval_every": args.eval_every,
                            "jobs": args.jobs, "seconds": time.perf_counter() - t0, "base_seconds": base_seconds,
                            "cpu_seconds": usage.ru_utime + usage.ru_stime + own.ru_utime + own.ru_stime,
                            "uptime": uptime, "uptime_after": os.popen("uptime").read().strip(), "cache": str(cache_dir())}, "runs": runs}
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=1))
        partial.unlink(missing_ok=True)
    results = json.loads(out.read_text())
    text = report(results)
    if out == OUT_JSON:
        OUT_MD.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
