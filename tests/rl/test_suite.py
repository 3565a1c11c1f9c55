"""The problem suite: its targets, the child scores, the shared-policy loop and the example."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from qdevolve.rl.tasks.expr_dsl import PROBES, expression_pool
from qdevolve.rl.tasks.suite import (
    SEED_PARENT,
    SuiteTarget,
    load_targets,
    matching_classes,
    score_child,
    targets_from_json,
)
from qdevolve.rl.tasks.suite_heldout import load_heldout

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_suite_has_32_graded_underdetermined_targets():
    train, held = load_targets(), load_heldout()
    assert len(train) >= 32 and len(held) >= 4
    assert not {t.examples for t in train} & {t.examples for t in held}
    assert not {t.name for t in train} & {t.name for t in held}
    p = [t.base_pass1 for t in train + held]
    assert max(p) >= 0.1 and min(p) < 0.001  # graded from about 0.2 to below 0.001
    pool = expression_pool(200000, 1)
    for t in train + held:
        assert 2 <= len(t.examples) <= 4
        assert score_child(t, t.reference).correct
        assert not score_child(t, SEED_PARENT).correct
        assert len(matching_classes(t.examples, pool)) == t.classes >= 2, t.name


def test_score_child_bits_classes_and_invalid():
    t = SuiteTarget("a", ((0, 1), (1, 2), (2, 5)), "x*x+1")
    c = score_child(t, "x*x+1")
    assert c.correct and c.bits == "111" and c.vector == [1.0, 1.0, 1.0]
    assert c.semantic == ",".join(str(x * x + 1) for x in PROBES)
    half = score_child(t, "x+1")
    assert half.bits == "110" and half.score == pytest.approx(2 / 3) and not half.correct
    for bad in ("", "x+", "xxxxxxxxxxxx", "4*x"):
        b = score_child(t, bad)
        assert not b.valid and b.bits == "000" and b.semantic is None


def test_targets_from_json_names_the_bad_row():
    with pytest.raises(ValueError, match="f.json: target bad: reference"):
        targets_from_json([{"name": "bad", "examples": [[0, 5]], "reference": "x"}], "f.json")
    with pytest.raises(ValueError, match="target #0"):
        targets_from_json([{"examples": [[0, 0]]}], "f.json")


@pytest.mark.slow
def test_suite_edit_prompts_show_examples_parent_and_bits():
    from qdevolve.rl.tasks import get_task

    task = get_task("suite_edit")
    pairs = task.sft_examples(np.random.default_rng(1), 200)
    counts = {len(p.split("|")[0].split(",")) for p, _ in pairs}
    assert counts == {2, 3, 4}
    for prompt, _child in pairs:
        io, _parent, bits = prompt.rstrip(":").split("|")
        assert len(bits) == len(io.split(","))
    t = load_targets()[0]
    assert t.prompt("x") == ",".join(f"{x}>{y}" for x, y in t.examples) + "|x|" + score_child(t, "x").bits + ":"


def _loop(objective, *, reward="score", samples=64, seed=0):
    from qdevolve.rl.tasks import get_task
    from qdevolve.rl.tasks.suite_loop import LoopConfig, SuiteLoop
    from qdevolve.rl.tiny import build_model, build_tokenizer

    tok = build_tokenizer(get_task("suite_edit").alphabet)
    model = build_model(tok, n_embd=16, n_layer=1, n_head=2, n_positions=64, seed=seed)
    cfg = LoopConfig(objective=objective, reward=reward, samples=samples, group=4, groups_per_step=4,
                     checkpoints=(samples // 2, samples), seed=seed)
    return SuiteLoop(load_targets()[:6], model, tok, cfg)


@pytest.mark.slow
def test_loop_equal_samples_per_target_groups_keep_their_prompt(monkeypatch):
    loop = _loop({"type": "grpo"})
    seen = []
    real = loop.trainer.step

    def spy(groups):
        seen.extend(groups)
        return real(groups)

    monkeypatch.setattr(loop.trainer, "step", spy)
    out = loop.run()
    assert out["samples"] == 64 and out["curves"]["samples"] == [32.0, 64.0]
    assert len(out["versions"]) == 5  # the base and one version per round
    assert len(seen) == 16 and all(g.size == 4 for g in seen)
    names = [g.prompt_id for g in seen]
    assert sorted(set(names)) == sorted(t.name for t in load_targets()[:6])
    assert max(names.count(n) for n in set(names)) - min(names.count(n) for n in set(names)) <= 1
    for g in seen:
        assert g.prompt.endswith(":") and g.metadata["prompt_token_ids"]
        assert g.reward_vectors.shape == (4, len(next(t for t in load_targets() if t.name == g.prompt_id).examples))
        assert g.candidate_vectors.shape[1] == 1


def test_lazy_child_is_penalised_and_binary_counts_only_new_correct():
    from qdevolve.rl.tasks.suite_loop import SuiteLoop

    t = SuiteTarget("a", ((0, 1), (1, 2)), "x+1")
    parent, same, good = score_child(t, "x+1"), score_child(t, "x+1"), score_child(t, "1+x")
    loop = SuiteLoop.__new__(SuiteLoop)
    from qdevolve.rl.tasks.suite_loop import LoopConfig

    loop.config = LoopConfig(reward="score")
    assert loop._reward(same, parent) == -0.3 and loop._reward(good, parent) == 1.0
    loop.config = LoopConfig(reward="binary")
    assert loop._reward(same, parent) == 0.0 and loop._reward(good, parent) == 1.0


def test_target_state_counts_classes_and_first_solve():
    from qdevolve.rl.tasks.suite_loop import TargetState

    t = SuiteTarget("a", ((0, 0), (1, 1)), "x*x")
    s = TargetState(t)
    assert s.solved_at is None  # the seed parent x fits: still not counted until a child is correct
    s.add(score_child(t, "x*x"), 5)
    s.add(score_child(t, "x*x*x"), 6)
    s.add(score_child(t, "x*x*1"), 7)  # the same class as x*x
    assert s.solved_at == 5 and len(s.correct_classes) == 2
    p = s.parent(np.random.default_rng(0), 1.0, 8)
    assert p.correct


def test_example_targets_are_the_training_targets():
    import importlib.util

    ex = ROOT / "examples" / "suite"
    spec = importlib.util.spec_from_file_location("suite_example_evaluator", ex / "evaluator.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert [{k: v for k, v in row.items() if k != "third"} for row in mod.TARGETS] == \
        [t.to_json() for t in load_targets()]
    names = set()
    for p in ex.glob("initial_program*.py"):
        line = next(x for x in p.read_text().splitlines() if x.startswith("TARGET = "))
        names.add(line.split('"')[1])
    assert names == {t.name for t in load_targets()}


def test_example_third_example_follows_the_reference():
    """Each target's optional third example: the first input in 0..5 not shown, the reference's output."""
    import importlib.util

    from qdevolve.rl.tasks.expr_dsl import evaluate

    spec = importlib.util.spec_from_file_location("suite_example_evaluator", ROOT / "examples" / "suite" / "evaluator.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for row in mod.TARGETS:
        x, y = row["third"]
        shown = {a for a, _ in row["examples"]}
        assert x not in shown and x == min(set(range(6)) - shown)
        assert evaluate(row["reference"], x) == y


def test_example_shows_three_examples_when_asked(tmp_path):
    """``EXAMPLES_PER_TARGET = 3`` (``bench_suite.py --examples 3``): the evaluator scores and shows
    the third example, so a program fitting only the two examples is a two-thirds solution."""
    import importlib.util
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from suite_engine import suite_targets, write_example

    from qdevolve.rl.tasks.expr_dsl import expression_pool

    row = suite_targets(None)[0]
    mods = {}
    for k in (2, 3):
        d = write_example(tmp_path / f"ex{k}", [row], k)
        spec = importlib.util.spec_from_file_location(f"suite{k}", d / "evaluator.py")
        mods[k] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mods[k])
    prog = tmp_path / "p.py"

    def score(k, expr):
        prog.write_text(f'TARGET = "{row["name"]}"\nEXPR = "{expr}"\n')
        return mods[k].evaluate(str(prog))

    out = score(3, row["reference"])
    assert out["tests"] == [1.0, 1.0, 1.0] and out["artifacts"]["examples"].count(">") == 3
    half = next(e for es in expression_pool(20000, 0).values() for e in es
                if score(2, e)["combined_score"] == 1.0 and score(3, e)["combined_score"] < 1.0)
    assert score(3, half)["tests"] == [1.0, 1.0, 0.0]
