"""The expr_edit task: (parent -> child) edit pairs that make the tiny policy a mutation operator."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from qdevolve.rl.tasks import get_task
from qdevolve.rl.tasks.expr_dsl import MAX_LEN, parse
from qdevolve.rl.tasks.expr_edit import (
    ExprEditTask,
    edit_expression,
    edit_prompt,
    parse_edit_prompt,
    pass_bits,
)

TARGET = [(0, 1), (1, 4), (2, 7), (3, 10), (5, 16)]  # 3x + 1


def test_prompt_format_round_trips() -> None:
    p = edit_prompt(TARGET, "x+1", pass_bits("x+1", TARGET))
    assert p == "0>1,1>4,2>7,3>10,5>16|x+1|10000:"
    assert parse_edit_prompt(p) == (TARGET, "x+1", "10000")
    assert pass_bits("x*3+1", TARGET) == "11111" and pass_bits("x+(", TARGET) == "00000"
    with pytest.raises(ValueError, match="expr_edit prompt"):
        parse_edit_prompt("0>1,1>4:")


def test_one_edit_children_differ_parse_and_fit() -> None:
    rng = np.random.default_rng(0)
    seen_shapes = Counter()
    for parent in ("x", "3", "x+1", "3*x+1", "x*x-x", "(x+1)*x", "x+x+x+1"):
        for _ in range(60):
            child = edit_expression(parent, rng)
            assert child is not None and child != parent and len(child) <= MAX_LEN
            parse(child)
            seen_shapes[len(child) - len(parent)] += 1
    assert len(seen_shapes) >= 4, "edits grow, shrink and keep the length"


@pytest.mark.slow
def test_pairs_are_parent_conditioned_and_greedy_improves() -> None:
    pairs = ExprEditTask(greedy=1.0).sft_examples(np.random.default_rng(1), 300)
    blind = ExprEditTask(greedy=0.0).sft_examples(np.random.default_rng(1), 300)

    def gain(examples: list[tuple[str, str]]) -> float:
        out = []
        for prompt, child in examples:
            io, parent, bits = parse_edit_prompt(prompt)
            assert child != parent and bits == pass_bits(parent, io)
            out.append(pass_bits(child, io).count("1") - bits.count("1"))
        return float(np.mean(out))

    assert gain(pairs) > gain(blind) + 0.3


def test_verify_scores_the_child_on_the_prompt_examples() -> None:
    t = get_task("expr_edit")
    prompt = edit_prompt(TARGET, "x+1", "10000")
    v = t.verify(prompt, "3*x+1")
    assert v.correct and v.reward == 1.0 and v.outcome == "3*x+1"
    assert t.verify(prompt, "x+2").reward == 0.0
    bad = t.verify(prompt, "x+(")
    assert bad.reward == 0.0 and bad.outcome is None
    assert len(t.prompts("train")) == 18 and len(t.prompts("test")) == 9
    for p in t.prompts("test"):
        parse_edit_prompt(p)


def test_tokenizer_covers_every_prompt_character() -> None:
    pytest.importorskip("tokenizers")
    from qdevolve.rl.tiny import build_tokenizer

    t = ExprEditTask()
    tok = build_tokenizer(t.alphabet)
    for prompt, child in t.sft_examples(np.random.default_rng(2), 50):
        ids = tok(prompt + child, add_special_tokens=False)["input_ids"]
        assert tok.unk_token_id not in ids and len(ids) == len(prompt + child)


@pytest.mark.slow
def test_pretrained_base_is_a_mutation_operator() -> None:
    """The cached base (built on first use): valid children, rarely the parent, parent-dependent."""
    torch = pytest.importorskip("torch")
    from qdevolve.rl.tiny import load_tiny_policy

    model, tok = load_tiny_policy("expr_edit")
    torch.manual_seed(0)
    dists = {}
    for parent in ("x+1", "3*x", "x*x"):
        prompt = edit_prompt(TARGET, parent, pass_bits(parent, TARGET))
        ids = tok(prompt, return_tensors="pt")
        out = model.generate(**ids, do_sample=True, max_new_tokens=11, num_return_sequences=64,
                             pad_token_id=tok.pad_token_id)
        texts = [tok.decode(o[ids["input_ids"].shape[1]:], skip_special_tokens=True).strip() for o in out]
        valid = sum(1 for c in texts if c and pass_bits(c, TARGET) is not None and _parses(c)) / 64
        assert valid >= 0.8, (parent, texts)
        assert sum(c == parent for c in texts) / 64 <= 0.15, (parent, texts)
        dists[parent] = Counter(texts)
    names = list(dists)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            keys = set(dists[a]) | set(dists[b])
            tv = 0.5 * sum(abs(dists[a][k] - dists[b][k]) for k in keys) / 64
            assert tv >= 0.5, f"children of {a} and {b} overlap too much (TV {tv:.2f})"


def _parses(text: str) -> bool:
    try:
        parse(text)
    except ValueError:
        return False
    return len(text) <= MAX_LEN
