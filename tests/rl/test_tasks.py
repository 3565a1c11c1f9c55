"""Tasks: verifiers, keys, the safe DSL evaluator, prompt design, the runner's groups and metrics."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from qdevolve.errors import ConfigError
from qdevolve.rl.tasks import BanditTask, ExprDSLTask, MultiAnswerTask, Task, get_task
from qdevolve.rl.tasks.expr_dsl import (
    DSLError,
    evaluate,
    expression_pool,
    parse,
    semantic_key,
    strategy_key,
)
from qdevolve.rl.tasks.multi_answer import parse_prompt, solutions


@pytest.mark.parametrize("name", ["bandit", "multi_answer", "expr_dsl", "few_answer"])
def test_tasks_follow_protocol(name: str) -> None:
    task = get_task(name)
    assert isinstance(task, Task)
    assert task.prompts("train")
    ex = task.sft_examples(np.random.default_rng(0), 20)
    assert len(ex) == 20 and all(set(p + a) <= set(task.alphabet) for p, a in ex)


def test_unknown_task() -> None:
    with pytest.raises(ConfigError, match="available"):
        get_task("nope")


def test_bandit_outcomes_and_skew() -> None:
    t = BanditTask()
    p = t.base_probs()
    assert p.shape == (16,) and p.sum() == pytest.approx(1.0) and p[:8].sum() == pytest.approx(0.5)
    assert np.all(np.diff(p[:8]) < 0)  # Zipf-skewed over correct outcomes
    assert np.allclose(np.exp(t.base_logits()) / np.exp(t.base_logits()).sum(), p)
    assert t.verify("bandit:", "3").correct and not t.verify("bandit:", "12").correct
    assert t.verify("bandit:", "99").outcome is None


def test_multi_answer_verifier_and_bands() -> None:
    t = MultiAnswerTask()
    counts = [t.n_solutions(p) for p in t.prompts()]
    assert max(counts) >= 60 and min(counts) <= 3  # broad to nearly unique
    assert set(t.prompts()).isdisjoint(t.prompts("test"))
    m, r, s = parse_prompt("m=7 r=3 s=12:")
    assert (m, r, s) == (7, 3, 12)
    sol = solutions(7, 3, 12)
    assert all(n % 7 == 3 and sum(map(int, str(n))) == 12 for n in sol)
    brute = [n for n in range(100, 1000) if n % 7 == 3 and sum(int(c) for c in str(n)) == 12]
    assert list(sol) == brute
    v = t.verify("m=7 r=3 s=12:", str(sol[0]))
    assert v.correct and v.reward == 1.0 and v.outcome == str(sol[0]) and v.strategy == str(sol[0])[0]
    wrong = t.verify("m=7 r=3 s=12:", "101")
    assert not wrong.correct and wrong.tests.tolist() == [float(101 % 7 == 3), 0.0]
    assert t.verify("m=7 r=3:", "012").outcome is None and t.verify("m=7 r=3:", "12").reward == 0.0
    assert len(t.answer_space("m=7 r=3:")) == 900


def test_dsl_evaluator_is_pure_and_safe() -> None:
    assert evaluate("2*x+2", 5) == 12
    assert evaluate("(x+1)*(x+1)", 2) == 9
    assert evaluate("x-x-1", 4) == -1  # left associative
    assert evaluate("3-(x-1)", 4) == 0
    for bad in ["__import__('os')", "x**2", "x/2", "(x+1", "x+", "", "2x", "4"]:
        with pytest.raises(DSLError):
            parse(bad)
    with pytest.raises(DSLError):
        parse("(" * 30 + "x" + ")" * 30)
    with pytest.raises(DSLError, match="range"):
        evaluate("x*x*x*x*x*x*x*x*x*x*x*x*x*x*x*x", 10**3)
    assert semantic_key("x+x+2") == semantic_key("2*x+2") == semantic_key("(x+1)*2")
    assert strategy_key("x+x+2") != strategy_key("(x+1)*2")


@pytest.mark.slow
def test_expr_dsl_keys_and_partial_credit_tasks() -> None:
    t = ExprDSLTask()
    prompt = t.prompts()[0]  # 2*x+2
    a, b = t.verify(prompt, "2*x+2"), t.verify(prompt, "(x+1)*2")
    assert a.correct and b.correct and a.semantic == b.semantic and a.outcome != b.outcome
    bad = t.verify(prompt, "x+(")
    assert bad.reward == 0.0 and bad.outcome is None
    # mixed tasks: no pool program passes every test, but programs pass different subsets
    pool = [e for exprs in expression_pool().values() for e in exprs]
    mixed = t.prompts()[12:]
    assert len(mixed) == 4
    for p in mixed:
        verdicts = [t.verify(p, e) for e in pool]
        assert not any(v.correct for v in verdicts)
        vecs = {tuple(v.tests) for v in verdicts if v.reward >= 0.6}
        assert len(vecs) >= 2
    for p in t.prompts()[:12]:
        assert any(t.verify(p, e).correct for e in t.good_programs(p.rstrip(":")))


def test_expr_dsl_multi_candidate_verdict() -> None:
    t = ExprDSLTask(candidates=3)
    prompt = t.prompts()[12]
    assert prompt.endswith("#3:") and t.max_new_tokens == 30
    v = t.verify(prompt, "x*x;2*x;x")
    assert v.candidates.shape == (3, 5) and len(v.candidate_keys) == 3
    assert v.tests.tolist() == v.candidates.max(axis=0).tolist()
    assert v.reward == pytest.approx(v.candidates.mean(axis=1).max())
    short = t.verify(prompt, "x")
    assert short.candidates.shape == (3, 5) and short.candidates[1:].sum() == 0


def test_runner_groups_and_summary_on_a_tiny_model() -> None:
    from qdevolve.rl.tasks.runner import evaluate_policy, make_groups, summarize
    from qdevolve.rl.tiny import build_model, build_tokenizer

    task = BanditTask()
    tok = build_tokenizer(task.alphabet)
    model = build_model(tok, n_embd=32, n_layer=1, n_head=2, n_positions=16, seed=0)
    groups = make_groups(task, model, tok, task.prompts(), 6, generator=torch.Generator().manual_seed(0))
    g = groups[0]
    assert g.size == 6 and g.reward_vectors.shape == (6, 1) and len(g.outcome_keys) == 6
    assert g.candidate_vectors.shape == (6, 1, 1)  # a single answer is a set of one candidate
    assert g.rewards.tolist() == [float(c) for c in g.metadata["correct"]]
    assert all(task.verify(g.prompt, t).outcome == k or k.startswith("<invalid")
               for t, k in zip(g.metadata["texts"], g.outcome_keys, strict=True))
    evals = evaluate_policy(task, model, tok, n=32)
    e = evals[0]
    assert e.probs.shape == (16,) and 0 < e.probs.sum() <= 1.0 + 1e-9
    res = summarize(evals, evals, ks=(1, 4, 32))
    assert res["pass@1"] == pytest.approx(e.probs[:8].sum())
    assert res["pass@4"] == pytest.approx(1 - (1 - e.probs[:8].sum()) ** 4)
    assert res["prompts_lost"] == 0.0 and res["support_lost"] == 0.0
    assert res["D_32"] == len(e.correct_outcomes) <= 8


def test_few_answer_task_prompts_verifier_and_skewed_corpus() -> None:
    from collections import Counter

    from qdevolve.rl.tasks.few_answer import FewAnswerTask, parse_prompt, solutions

    task = get_task("few_answer")
    assert isinstance(task, FewAnswerTask)
    for split, (lo, hi) in (("train", (4, 8)), ("test", (4, 8)), ("hard_train", (2, 4)), ("hard_test", (2, 4))):
        ps = task.prompts(split)
        assert ps and all(lo <= len(solutions(*parse_prompt(p))) <= hi for p in ps)
    assert not set(task.prompts("train")) & set(task.prompts("test"))
    # m=13 r=5: 18, 31, 44, 57, 70, 83, 96 (n = 5 + 13 j between 10 and 99)
    assert solutions(13, 5) == (18, 31, 44, 57, 70, 83, 96)
    v = task.verify("m=13 r=5:", "44")
    assert v.correct and v.reward == 1.0 and v.outcome == "44" and v.strategy == "4"
    assert not task.verify("m=13 r=5:", "45").correct
    assert task.verify("m=13 r=5:", "05").outcome is None and task.verify("m=13 r=5:", "100").reward == 0.0
    assert sorted(task.correct_answers("m=13 r=5:")) == ["18", "31", "44", "57", "70", "83", "96"]
    with pytest.raises(ValueError, match="split"):
        task.prompts("valid")
    # the corpus is Zipf-skewed: on one prompt the favourite is drawn about
    # 1 / H_7 = 1 / (1 + 1/2 + ... + 1/7) = 0.386 of the correct draws (zipf = 1)
    one = FewAnswerTask(n_train=1, n_test=0, n_hard_train=1, n_hard_test=0, wrong_fraction=0.0)
    prompt = one.prompts("train")[0]
    draws = [a for p, a in one.sft_examples(np.random.default_rng(0), 6000) if p == prompt]
    fav = one.correct_answers(prompt)[0]
    n = len(one.correct_answers(prompt))
    harmonic = sum(1 / k for k in range(1, n + 1))
    assert Counter(draws)[fav] / len(draws) == pytest.approx(1 / harmonic, abs=0.04)
    assert all(one.verify(prompt, a).correct for a in draws)
