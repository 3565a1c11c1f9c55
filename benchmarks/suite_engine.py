"""The problem suite through qdevolve's own joined run: arms, run configs, the worker, and the
measurements read back from each run's lineage database (``benchmarks/bench_suite.py``).

An *arm* is ``OBJECTIVE[+CHANGE...]``: ``frozen`` (the same joined run with ``train.enabled:
false``: the base samples, is never updated), or an objective (``grpo``, ``ips``, ``vpo``,
``rare``, ``es``) trained in the loop, with design changes folded into its ``train`` section:

* ``kl_lr``: ``trainer: {learning_rate: 3e-4, beta: 0.1}`` (a k3 KL anchor to the base, TRL's
  ``beta``, and a lower learning rate; :class:`qdevolve.rl.config.TrainerConfig`);
* ``improve``: ``reward: improvement_clipped`` (``clip(s - s_parent, 0, 1)``,
  :func:`qdevolve.rl.shaping.clipped_improvement`);
* ``anycopy``: ``shaping.same_class: -0.3`` (a child whose semantic class, its outputs on x =
  -4..11, equals that of any program of its target stored before it; exact copies of any stored
  program already earn ``duplicate: -0.3`` in every arm) with ``error`` and ``no_program`` at
  -0.4, so a failed child never pays more than a repeat (without them a policy pushed off
  repeats drifts to text that is no program: measured on seed 5, KL 0.5-0.7 to the base);
* ``all``: the three together.

Without a change an arm runs the example's previous settings (lr 1e-3, no KL, the score as
reward, ``lazy``/``duplicate`` -0.3), so each change is measured against them. The number of
examples per target (``--examples``: 2, or 3 with each target's ``third`` example) and the
per-target budget are task settings shared by every arm.

Measured from the lineage database (rollouts in the order stored, copies included): targets
solved against samples, distinct semantic classes of correct programs per solved target,
evaluations, copies, trainer steps; after the run, the final policy version (the base for
``frozen``) samples 64 children of the seed parent on each held-out target (pass@1, pass@8,
targets with a correct sample).
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "suite"
OBJECTIVES: dict[str, dict[str, Any]] = {
    "grpo": {"type": "grpo"},
    "ips": {"type": "ips", "reward": "raw"},  # graded rewards (score or clipped improvement), not thresholded
    # IPS keyed on the child's semantic cluster (the example's `cluster: {type: semantic}`: the
    # program's outputs), not on the completion text, which rarely repeats within a group of 8
    "ipsc": {"type": "ips", "reward": "raw", "key": "cluster"},
    "rare": {"type": "rare", "alpha": 1.0},
    "vpo": {"type": "vpo", "m": 1},
    "es": {"type": "es", "population": 8, "sigma": 0.01, "alpha": 0.003},
}
CHANGES = ("kl_lr", "improve", "anycopy", "fail")
ALL = ("kl_lr", "improve", "anycopy")  # "+all": the three design changes of the issue ("fail" is inside anycopy)
OLD_TRAINER = {"learning_rate": 1e-3, "beta": 0.0}
NEW_TRAINER = {"learning_rate": 3e-4, "beta": 0.1}
SEED_PROGRAM = '''"""Suite target {name}: EXPR must reproduce the target's examples (evaluator.py, TARGETS)."""

TARGET = "{name}"

# EVOLVE-BLOCK-START
EXPR = "x"
# EVOLVE-BLOCK-END
'''


def parse_arm(arm: str) -> tuple[str, tuple[str, ...]]:
    """``(objective or 'frozen', changes)`` of an arm name; a bad name says what exists."""
    head, *rest = arm.strip().split("+")
    changes = ALL if rest == ["all"] else tuple(rest)
    if head != "frozen" and head not in OBJECTIVES:
        raise ValueError(f"arm {arm!r}: unknown objective {head!r}; known: frozen, {', '.join(OBJECTIVES)}")
    bad = [c for c in changes if c not in CHANGES]
    if bad:
        raise ValueError(f"arm {arm!r}: unknown change(s) {', '.join(bad)}; known: {', '.join(CHANGES)}, all")
    if head == "frozen" and changes:
        raise ValueError(f"arm {arm!r}: the frozen base trains nothing, so it takes no change")
    return head, changes


def suite_targets(n: int | None) -> list[dict[str, Any]]:
    """The example's training targets (its evaluator's ``TARGETS``), or ``n`` of them spread
    evenly over the difficulty order (the list is sorted by the frozen base's pass@1)."""
    rows = evaluator_module().TARGETS
    if n is None or n >= len(rows):
        return list(rows)
    if n < 1:
        raise ValueError(f"--targets must be >= 1, got {n}")
    step = len(rows) / n
    return [rows[int(i * step)] for i in range(n)]


_EVAL = None


def evaluator_module() -> Any:
    """The example's evaluator as a module (trusted code: pure scoring of the DSL)."""
    global _EVAL
    if _EVAL is None:
        import importlib.util

        spec = importlib.util.spec_from_file_location("suite_example_evaluator", EXAMPLE / "evaluator.py")
        assert spec is not None and spec.loader is not None
        _EVAL = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(_EVAL)
    return _EVAL


def write_example(directory: Path, targets: list[dict[str, Any]], examples: int) -> Path:
    """An example directory of ``targets``: the suite's evaluator (``EXAMPLES_PER_TARGET`` set
    to ``examples``) and one seed per target, as in ``examples/suite``."""
    directory.mkdir(parents=True, exist_ok=True)
    text = (EXAMPLE / "evaluator.py").read_text()
    text, n = re.subn(r"^EXAMPLES_PER_TARGET = \d+", f"EXAMPLES_PER_TARGET = {int(examples)}", text, flags=re.M)
    if n != 1:
        raise RuntimeError(f"{EXAMPLE / 'evaluator.py'}: no 'EXAMPLES_PER_TARGET = N' line to set")
    (directory / "evaluator.py").write_text(text)
    for i, t in enumerate(targets):
        name = "initial_program.py" if i == 0 else f"initial_program_{t['name']}.py"
        (directory / name).write_text(SEED_PROGRAM.format(name=t["name"]))
    return directory


def run_config(arm: str, *, policy: str, samples: int, every: int, group: int) -> dict[str, Any]:
    """The ``config.yaml`` of one run of ``arm`` (the example's config, the arm's train section)."""
    import yaml

    head, changes = parse_arm(arm)
    config = yaml.safe_load((EXAMPLE / "config.yaml").read_text())
    config["run"].update(iterations=samples, workers=1, children_per_parent=group, max_duplicate_streak=10**9)
    train = config["train"]
    train.update(policy=policy, every=every, max_samples=samples, reward="score",
                 shaping={"lazy": -0.3, "duplicate": -0.3}, trainer=dict(OLD_TRAINER))
    if head == "frozen":
        train["enabled"] = False
        train["objective"] = dict(OBJECTIVES["grpo"])  # never stepped
    else:
        train["objective"] = dict(OBJECTIVES[head])
    if "kl_lr" in changes:
        train["trainer"] = dict(NEW_TRAINER)
    if "improve" in changes:
        train["reward"] = "improvement_clipped"
    if "anycopy" in changes:
        train["shaping"].update(same_class=-0.3, error=-0.4, no_program=-0.4)
    if "fail" in changes:  # failures priced as in anycopy, without its same-class penalty
        train["shaping"].update(error=-0.4, no_program=-0.4)
    return config


def plan_run(arm: str, seed: int, *, tmp: Path, example: Path, policy: str, samples: int, every: int,
             group: int, examples: int) -> dict[str, Any]:
    """Write one run's config; what a worker needs to run and measure it."""
    import yaml

    name = f"{arm.replace('+', '_')}-{seed}"
    cfg_path, db = tmp / f"{name}.yaml", tmp / f"{name}.sqlite"
    cfg_path.write_text(yaml.safe_dump(run_config(arm, policy=policy, samples=samples, every=every, group=group)))
    argv = [str(example), "--config", str(cfg_path), "--db", str(db), "--iterations", str(samples),
            "--seed", str(seed), "--sandbox", "local", "--no-progress"]
    return {"arm": arm, "seed": seed, "db": str(db), "argv": argv, "policy": policy, "examples": examples}


def run_plan(plan: dict[str, Any], checkpoints: list[int], heldout_n: int) -> dict[str, Any]:
    """Run one plan through ``qdevolve run`` in this process; its measurements."""
    import contextlib
    import io
    import time

    from qdevolve.cli.evolve import run as run_command

    t0 = time.time()
    with contextlib.redirect_stdout(io.StringIO()):
        run_command.main(args=plan["argv"], standalone_mode=False)
    wall = time.time() - t0
    out = measure(Path(plan["db"]), checkpoints)
    t1 = time.time()
    out["heldout"] = heldout(out.pop("final_policy") or plan["policy"], plan["examples"], n=heldout_n,
                             seed=plan["seed"] + 100)
    out.update(run_wall_s=wall, heldout_s=time.time() - t1)
    return out


def measure(db: Path, checkpoints: list[int]) -> dict[str, Any]:
    """Targets solved against samples, classes per solved target and run facts, from the store."""
    from qdevolve.db import open_store

    store = open_store(db)
    try:
        run_id = store.latest_run_id()
        evals: dict[str, Any] = {}
        for _seq, prog, res in store.iter_evaluated(run_id):
            evals[prog.id] = (prog, res)
        rollouts = store.rollouts(run_id)
        solved_at: dict[str, int] = {}
        classes: dict[str, set[tuple[Any, ...]]] = {}
        curves: dict[str, list[float]] = {"samples": [], "solved": [], "classes_per_solved": []}
        due = sorted(checkpoints)
        copies = 0
        for i, (_seq, ro) in enumerate(rollouts, start=1):
            copies += bool((ro.metadata or {}).get("duplicate_of"))
            prog_res = evals.get(ro.program_id or "")
            if prog_res is not None:
                _prog, res = prog_res
                if res.ok and res.score is not None and res.score >= 1.0:
                    target = str(res.artifacts.get("target"))
                    solved_at.setdefault(target, i)
                    classes.setdefault(target, set()).add(tuple(res.artifacts.get("outputs") or ()))
            while due and i >= due[0]:
                _point(curves, float(due.pop(0)), solved_at, classes)
        for c in due:  # fewer rollouts than planned: the end stands for the later points
            _point(curves, float(c), solved_at, classes)
        versions = store.policy_versions(run_id)
        steps = [float(v["metrics"]["step_seconds"]) for v in versions
                 if isinstance(v.get("metrics"), dict) and v["metrics"].get("step_seconds") is not None]
        latest = versions[-1] if len(versions) > 1 else None
        return {"curves": curves, "samples": len(rollouts), "groups": group_stats([ro for _, ro in rollouts]),
                "evaluations": sum(1 for p, _ in evals.values() if p.operator != "seed"), "copies": copies,
                "solved_at": solved_at, "classes": {t: len(c) for t, c in classes.items()},
                "trainer_steps": max(0, len(versions) - 1), "step_seconds": steps,
                "final_policy": latest["path"] if latest else None}
    finally:
        store.close()


def group_stats(rollouts: list[Any]) -> dict[str, float]:
    """What an objective keyed on classes can act on, from the stored rollouts (rewards as trained,
    shaping included): the share of children with a positive reward, the share of groups holding at
    least one and at least two of them, and the share of groups where two rewarded children share a
    ``cluster_key`` (the only groups where IPS weights a rewarded child by less than 1)."""
    groups: dict[str, list[Any]] = {}
    for ro in rollouts:
        if ro.reward is not None:
            groups.setdefault(ro.group_id or ro.id, []).append(ro)
    n_groups = len(groups) or 1
    n_children = sum(len(g) for g in groups.values()) or 1
    pos = {k: [ro for ro in g if ro.reward > 0] for k, g in groups.items()}
    repeated = sum(1 for g in pos.values() if len({ro.cluster_key for ro in g}) < len(g))
    return {"groups": float(len(groups)), "children": float(sum(len(g) for g in groups.values())),
            "rewarded_share": sum(len(g) for g in pos.values()) / n_children,
            "groups_with_1": sum(1 for g in pos.values() if len(g) >= 1) / n_groups,
            "groups_with_2": sum(1 for g in pos.values() if len(g) >= 2) / n_groups,
            "groups_repeated_rewarded_class": repeated / n_groups}


def remeasure_groups(raw: dict[str, Any], work: Path) -> int:
    """Add ``group_stats`` to every run of ``raw`` from its database kept under ``work`` (the
    ``--work`` of the command that ran it); returns how many runs were read."""
    from qdevolve.db import open_store

    n = 0
    for r in raw["runs"]:
        db = work / f"{r['arm'].replace('+', '_')}-{r['seed']}.sqlite"
        if r.get("error") or not db.exists():
            continue
        store = open_store(db)
        try:
            r["groups"] = group_stats([ro for _, ro in store.rollouts(store.latest_run_id())])
        finally:
            store.close()
        n += 1
    return n


def _point(curves: dict[str, list[float]], samples: float, solved_at: dict[str, int],
           classes: dict[str, set[tuple[Any, ...]]]) -> None:
    curves["samples"].append(samples)
    curves["solved"].append(float(len(solved_at)))
    curves["classes_per_solved"].append(
        statistics.fmean(len(classes[t]) for t in solved_at) if solved_at else 0.0)


def heldout(policy: str, examples: int, *, n: int, seed: int) -> dict[str, Any]:
    """pass@1, pass@8 and targets with a correct sample among ``n`` children of the seed parent,
    per held-out target, of the policy directory ``policy`` (read only here, after the run)."""
    from qdevolve.rl.tasks.suite_heldout import load_heldout
    from qdevolve.rl.tasks.suite_loop import load_policy, policy_pass_at

    targets = [with_examples(t, examples) for t in load_heldout()]
    model, tok = load_policy(policy)
    k8 = min(8, n)
    rows = policy_pass_at(model, tok, targets, n=n, ks=sorted({1, k8, n}), seed=seed)
    return {"per_target": rows, "n": n, "solved": float(sum(r[f"pass@{n}"] > 0 for r in rows.values())),
            "pass@1": statistics.fmean(r["pass@1"] for r in rows.values()),
            "pass@8": statistics.fmean(r[f"pass@{k8}"] for r in rows.values())}


def with_examples(target: Any, examples: int) -> Any:
    """``target`` showing ``examples`` examples: a third from its reference (:func:`third_example`)."""
    import dataclasses

    if examples == len(target.examples):
        return target
    if examples != 3 or len(target.examples) != 2:
        raise ValueError(f"{target.name}: {len(target.examples)} examples; only 2 -> 3 is supported")
    return dataclasses.replace(target, examples=(*target.examples, third_example(target.reference, target.examples)))


def third_example(reference: str, examples: Any) -> tuple[int, int]:
    """The first input in 0..5 not yet shown, with the reference's output (as the evaluator's ``third``)."""
    from qdevolve.rl.tasks.expr_dsl import evaluate

    used = {int(x) for x, _ in examples}
    for x in range(6):
        if x not in used:
            y = int(evaluate(reference, x))
            if abs(y) <= 999:
                return (x, y)
    raise ValueError(f"no third example in 0..5 for {reference!r}")

