"""What a joined run achieved, read back from its lineage database (``measure``), and the
base policy as a mutation operator (``operator_check``): the measurements of
``benchmarks/bench_joined.py``, kept apart from the runs that produce them.

Correctness and semantic classes use the example's own evaluator rules on the ``EXPR``
string (its AST whitelist; the expression is never executed).
"""

from __future__ import annotations

import importlib.util
import re
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from qdevolve import registry

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "expr_evolution"
PROBES = tuple(range(-4, 12))  # the inputs that define a correct program's semantic class
_EXPR = re.compile(r'EXPR = "([^"\n]*)"')
_EVALUATOR = None


def example_evaluator() -> Any:
    """The example's evaluator module (trusted code: its scoring functions are pure)."""
    global _EVALUATOR
    if _EVALUATOR is None:
        spec = importlib.util.spec_from_file_location("expr_evolution_evaluator", EXAMPLE / "evaluator.py")
        _EVALUATOR = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(_EVALUATOR)
    return _EVALUATOR


def expr_of(code: str) -> str | None:
    m = _EXPR.search(code)
    return m.group(1).replace(" ", "") if m else None


def outputs(expr: str, xs: tuple[int, ...] = PROBES) -> tuple[int, ...] | None:
    """The expression's values on ``xs`` through the evaluator's whitelist, or ``None``."""
    ev = example_evaluator()
    try:
        tree = ev.compile_expression(expr)
        return tuple(ev._value(tree, x) for x in xs)
    except ev.BadExpression:
        return None


def measure(db: Path, checkpoints: list[int]) -> dict[str, Any]:
    """Replay the run's archive from the store; sample the curves at the evaluation checkpoints."""
    from qdevolve.db import open_store

    store = open_store(db)
    run_id = store.latest_run_id()
    archive = registry.archive.create(store.get_run(run_id)["config"]["archive"])
    curves: dict[str, list[float]] = {k: [] for k in ("top50", "correct_cells", "distinct_correct",
                                                      "semantic_classes", "best")}
    scores: list[float] = []
    correct: set[str] = set()
    classes: set[tuple[int, ...]] = set()
    correct_ids: set[str] = set()
    n = 0
    for _seq, prog, res in store.iter_evaluated(run_id):
        archive.add(prog, res)
        if prog.operator == "seed":
            continue
        n += 1
        score = res.score if res.ok and res.score is not None else 0.0
        scores.append(score)
        if score >= 1.0:
            correct_ids.add(prog.id)
            text = expr_of(prog.code) or ""
            correct.add(text)
            sem = outputs(text)
            if sem is not None:
                classes.add(sem)
        if n in checkpoints:
            _snapshot(curves, archive, scores, correct_ids, correct, classes)
    while len(curves["top50"]) < len(checkpoints):  # fewer evaluations (more copies): its final archive stands
        _snapshot(curves, archive, scores, correct_ids, correct, classes)
    # pass@1 per policy version: the share of that version's samples whose child was correct
    per_version: dict[int, list[float]] = {}
    groups: dict[str, list[Any]] = {}
    for _seq, ro in store.rollouts(run_id):
        per_version.setdefault(int(ro.policy_version or 0), []).append(1.0 if ro.program_id in correct_ids else 0.0)
        groups.setdefault(ro.group_id or ro.id, []).append(ro)
    # why an objective may act like another: texts that never repeat in a group give IPS
    # counts of 1 (IPS = GRPO); groups with one reward value carry no advantage at all
    sizes = [len(g) for g in groups.values()]
    diagnostics = {
        "groups": len(groups), "mean_group_size": statistics.fmean(sizes) if sizes else 0.0,
        "all_texts_distinct": statistics.fmean(
            float(len({r.completion.strip() for r in g}) == len(g)) for g in groups.values()) if groups else 0.0,
        "no_reward_spread": statistics.fmean(
            float(len({r.reward for r in g}) == 1) for g in groups.values()) if groups else 0.0,
        "any_correct": statistics.fmean(
            float(any(r.program_id in correct_ids for r in g)) for g in groups.values()) if groups else 0.0,
    }
    samples = sum(len(g) for g in groups.values())
    copies = sum(1 for g in groups.values() for r in g if (r.metadata or {}).get("duplicate_of"))
    versions = store.policy_versions(run_id)
    steps = [float(v["metrics"].get("step_seconds")) for v in versions
             if isinstance(v.get("metrics"), dict) and v["metrics"].get("step_seconds") is not None]
    store.close()
    return {"checkpoints": checkpoints, "curves": curves, "evaluations": n, "samples": samples, "copies": copies,
            "trainer_steps": max(0, len(versions) - 1),
            "pass1": {str(v): statistics.fmean(xs) for v, xs in sorted(per_version.items())},
            "step_seconds": steps, "diagnostics": diagnostics}


def _snapshot(curves: dict[str, list[float]], archive: Any, scores: list[float], correct_ids: set[str],
              correct: set[str], classes: set[tuple[int, ...]]) -> None:
    top = sorted(scores, reverse=True)[:50]
    cells = sum(1 for e in archive.elites() if e.program_id in correct_ids)
    for key, value in (("top50", statistics.fmean(top) if top else 0.0), ("correct_cells", cells),
                       ("distinct_correct", len(correct)), ("semantic_classes", len(classes)),
                       ("best", max(scores, default=0.0))):
        curves[key].append(float(value))


# -- the base as a mutation operator -------------------------------------------------------
def operator_check(policy_dir: Path, samples: int = 64) -> dict[str, Any]:
    """Sample the base for fixed parents: valid share, copies of the parent, parent effect."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from qdevolve.rl.tasks.expr_edit import edit_prompt, pass_bits

    torch.set_num_threads(1)
    tok = AutoTokenizer.from_pretrained(policy_dir)
    model = AutoModelForCausalLM.from_pretrained(policy_dir, dtype=torch.float32).eval()
    ev = example_evaluator()
    pairs = list(ev.VISIBLE)
    parents = ["x+1", "x*x", "2*x+1", "x+x", "3*x", "3*x+1"]
    dists: dict[str, Counter[str]] = {}
    rows = []
    torch.manual_seed(0)
    for parent in parents:
        prompt = edit_prompt(pairs, parent, pass_bits(parent, pairs))
        ids = tok(prompt, return_tensors="pt")
        out = model.generate(**ids, do_sample=True, max_new_tokens=11, num_return_sequences=samples,
                             temperature=1.0, pad_token_id=tok.pad_token_id)
        texts = [tok.decode(o[ids["input_ids"].shape[1]:], skip_special_tokens=True).strip() for o in out]
        dists[parent] = Counter(texts)
        got = [outputs(t, tuple(x for x, _ in pairs)) if t else None for t in texts]
        rows.append({"parent": parent, "valid": sum(g is not None for g in got) / samples,
                     "equal_parent": sum(t == parent for t in texts) / samples,
                     "distinct": len(set(texts)),
                     "correct": sum(g is not None and list(g) == [y for _, y in pairs] for g in got) / samples,
                     "top": ", ".join(f"{t} ({c})" for t, c in dists[parent].most_common(4))})
    tvs = []
    for i, a in enumerate(parents):
        for b in parents[i + 1:]:
            keys = set(dists[a]) | set(dists[b])
            tvs.append(0.5 * sum(abs(dists[a][k] - dists[b][k]) for k in keys) / samples)
    return {"rows": rows, "mean_tv_between_parents": statistics.fmean(tvs)}
