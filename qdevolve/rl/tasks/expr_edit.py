"""Edit pairs for the expression DSL: the tiny policy as a *mutation operator*.

The ``expr_dsl`` task asks for an expression from input/output examples alone, so a policy
trained on it ignores any parent. This task asks for a **child of a given parent**. A
prompt holds the examples, the parent expression and the parent's per-test pass bits::

    0>1,1>4,2>7,3>10,5>16|x+1|10000:

and the answer is the child expression (``3*x+1``). :func:`edit_prompt` renders that
format; the ``policy`` mutation operator renders the same one from a run's parent with
``prompt_template: "0>1,1>4,2>7,3>10,5>16|{parent}|{tests}:"`` (``{parent}``: the
parent's EVOLVE-BLOCK in the form the policy writes it; ``{tests}``: its pass bits).

Pre-training data (:meth:`ExprEditTask.sft_examples`, read by :mod:`qdevolve.rl.tiny`):

* a target: a random DSL expression whose outputs on five inputs (``0,1,2,3,5`` half of
  the time, else five random inputs in ``0..7``) stay within ±999;
* a parent: a random expression (``parent_random`` of the time) or the target moved away
  by one to three random edits, so parents range from unrelated to one edit from correct;
* ``k`` distinct one-edit children of the parent (:func:`edit_expression`: swap a leaf,
  swap an operator, grow a leaf or subtree into ``(s op atom)``, shrink a node to one of
  its operands, or replace a subtree with a random one); the answer is one of the best
  of them by tests passed (probability ``greedy``) or any of them. A child never equals
  its parent.

The pairs are about editing in general: targets are drawn at random, so a benchmark's
own target is seen only by chance. The base is therefore a real mutation operator from the
start (its children differ from the parent, are usually valid, and move with the parent),
and in-loop training is what specialises it to a run's target.
"""

from __future__ import annotations

import bisect

import numpy as np

from qdevolve.rl.tasks.base import Verdict
from qdevolve.rl.tasks.expr_dsl import (
    MAX_LEN,
    DSLError,
    Node,
    _eval,
    _render,
    evaluate,
    expression_pool,
    parse,
    random_expression,
    semantic_key,
    strategy_key,
)

__all__ = ["ExprEditTask", "edit_prompt", "parse_edit_prompt", "edit_expression", "pass_bits",
           "EDIT_KINDS"]

EDIT_KINDS = ("leaf", "operator", "grow", "shrink", "replace")
_EDIT_WEIGHTS = np.array([0.3, 0.2, 0.25, 0.15, 0.1])
_EDIT_CDF = tuple(float(c) for c in np.cumsum(_EDIT_WEIGHTS)[:-1])  # bisect: 30x faster than rng.choice(p=)
_ATOMS: tuple[Node, ...] = (("x",), ("c", 1), ("c", 2), ("c", 3))
_INPUTS = (0, 1, 2, 3, 5)


def edit_prompt(pairs: list[tuple[int, int]], parent: str, bits: str) -> str:
    """``"<x>y,...|<parent>|<bits>:"``, the prompt format of this task."""
    return ",".join(f"{x}>{y}" for x, y in pairs) + f"|{parent}|{bits}:"


def parse_edit_prompt(prompt: str) -> tuple[list[tuple[int, int]], str, str]:
    """``(I/O pairs, parent, bits)`` of an :func:`edit_prompt` text."""
    parts = prompt.strip().rstrip(":").split("|")
    if len(parts) != 3:
        raise ValueError(f"not an expr_edit prompt (want 'IO|parent|bits:'): {prompt!r}")
    pairs = []
    for item in parts[0].split(","):
        x, y = item.split(">", 1)
        pairs.append((int(x), int(y)))
    return pairs, parts[1], parts[2]


def pass_bits(expression: str | Node, pairs: list[tuple[int, int]]) -> str:
    """One character per I/O pair: ``1`` where ``expression`` gives the output, else ``0``."""
    try:
        tree = parse(expression) if isinstance(expression, str) else expression
        return "".join("1" if _eval(tree, x) == y else "0" for x, y in pairs)
    except DSLError:
        return "0" * len(pairs)


def _paths(node: Node, prefix: tuple[int, ...] = ()) -> list[tuple[int, ...]]:
    out = [prefix]
    if node[0] in "+-*":
        out += _paths(node[1], (*prefix, 1)) + _paths(node[2], (*prefix, 2))
    return out


def _get(node: Node, path: tuple[int, ...]) -> Node:
    for i in path:
        node = node[i]
    return node


def _put(node: Node, path: tuple[int, ...], new: Node) -> Node:
    if not path:
        return new
    parts = list(node)
    parts[path[0]] = _put(node[path[0]], path[1:], new)
    return tuple(parts)


def _random_small(rng: np.random.Generator) -> Node:
    return parse(random_expression(rng, max_len=5, p_leaf=0.6))


def edit_expression(parent: str, rng: np.random.Generator, *, max_len: int = MAX_LEN,
                    tries: int = 20) -> str | None:
    """One random edit of ``parent`` (see the module docstring), or ``None`` if none fits.

    The child is rendered with minimal parentheses, differs from the parent's text and
    has at most ``max_len`` characters.
    """
    try:
        tree = parse(parent)
    except DSLError:
        tree = _random_small(rng)  # an unparsable parent: start again from something small
    norm = parent.replace(" ", "")
    for _ in range(tries):
        paths = _paths(tree)
        path = paths[int(rng.integers(len(paths)))]
        sub = _get(tree, path)
        kind = EDIT_KINDS[bisect.bisect_right(_EDIT_CDF, rng.random())]
        if kind == "leaf" and sub[0] in ("x", "c"):
            new = _ATOMS[int(rng.integers(len(_ATOMS)))]
        elif kind == "operator" and sub[0] in "+-*":
            new = ("+-*"[int(rng.integers(3))], sub[1], sub[2])
        elif kind == "grow":
            atom = _ATOMS[int(rng.integers(len(_ATOMS)))]
            op = "+-*"[int(rng.integers(3))]
            new = (op, sub, atom) if rng.random() < 0.5 else (op, atom, sub)
        elif kind == "shrink" and sub[0] in "+-*":
            new = sub[1 + int(rng.integers(2))]
        elif kind == "replace":
            new = _random_small(rng)
        else:
            continue
        text = _render(_put(tree, path, new))
        if text != norm and len(text) <= max_len:
            try:
                evaluate(text, 0)
            except DSLError:
                continue
            return text
    return None


class ExprEditTask:
    """Parent-conditioned expression edits (see the module docstring).

    Args:
        k: One-edit children drawn per pre-training example.
        greedy: Probability that the answer is one of the best of the ``k`` children
            (by tests passed); otherwise any of them.
        parent_random: Probability that a parent is a random expression rather than the
            target moved away by one to three edits.
        seed: Seed of the expression pool the targets are drawn from.
    """

    name = "expr_edit"
    alphabet = "0123456789x+-*(),>:;#|"
    # the joined example's base: 500 steps at lr 4e-3 match 800 at 3e-3 (valid children 0.97,
    # copies <= 0.06, pass@64 0.50 vs 0.44 on the train prompts) in 60 % of the time
    tiny_defaults = {"sft_steps": 500, "lr": 4e-3}

    def __init__(self, *, k: int = 6, greedy: float = 0.5, parent_random: float = 0.4, seed: int = 0) -> None:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if not 0.0 <= greedy <= 1.0 or not 0.0 <= parent_random <= 1.0:
            raise ValueError(f"greedy and parent_random are probabilities, got {greedy}, {parent_random}")
        self.k, self.greedy, self.parent_random, self.seed = k, greedy, parent_random, seed
        self.max_new_tokens = MAX_LEN + 1

    # -- prompts and verification ----------------------------------------------------------
    def prompts(self, split: str = "train") -> list[str]:
        """Fixed edit prompts: each target paired with three parents at several distances."""
        if split not in ("train", "test"):
            raise ValueError(f"split must be 'train' or 'test', got {split!r}")
        targets = ("2*x+2", "x*x", "3*x", "x*x+x", "x*3+3", "2*x-1") if split == "train" \
            else ("3*x+1", "x*x+2", "3*x-1")
        rng = np.random.default_rng(1 if split == "train" else 2)
        out = []
        for target in targets:
            pairs = [(x, evaluate(target, x)) for x in _INPUTS]
            for parent in ("x+1", self._parent_near(target, rng, 1), self._parent_near(target, rng, 2)):
                out.append(edit_prompt(pairs, parent, pass_bits(parent, pairs)))
        return out

    def verify(self, prompt: str, completion: str) -> Verdict:
        """Score the child on the prompt's examples (the parent plays no part in the reward)."""
        pairs, _parent, _bits = parse_edit_prompt(prompt)
        text = completion.strip().replace(" ", "")
        if not text or len(text) > MAX_LEN:
            return Verdict(0.0, np.zeros(len(pairs)), False)
        try:
            tree = parse(text)
            tests = np.array([float(_eval(tree, x) == y) for x, y in pairs])
            sem = semantic_key(tree)
        except DSLError:
            return Verdict(0.0, np.zeros(len(pairs)), False)
        return Verdict(float(tests.mean()), tests, bool(tests.all()), text, sem, strategy_key(text))

    def answer_space(self, prompt: str) -> list[str] | None:
        return None

    # -- pre-training pairs ---------------------------------------------------------------
    def _parent_near(self, target: str, rng: np.random.Generator, edits: int) -> str:
        parent = target
        for _ in range(edits):
            parent = edit_expression(parent, rng) or parent
        return parent if parent != target else (edit_expression(target, rng) or "x")

    def _target(self, rng: np.random.Generator, pool: dict[str, tuple[str, ...]],
                keys: list[str]) -> tuple[str, list[tuple[int, int]]] | None:
        target = pool[keys[int(rng.integers(len(keys)))]][0]
        xs = _INPUTS if rng.random() < 0.5 else tuple(sorted(rng.choice(8, size=5, replace=False).tolist()))
        try:
            pairs = [(x, evaluate(target, x)) for x in xs]
        except DSLError:
            return None
        if any(abs(y) > 999 for _, y in pairs):
            return None
        return target, pairs

    def edit_pair(self, rng: np.random.Generator, pool: dict[str, tuple[str, ...]] | None = None,
                  keys: list[str] | None = None) -> tuple[str, str] | None:
        """One ``(prompt, child)`` pre-training pair, or ``None`` when the draw did not fit."""
        if pool is None or keys is None:
            pool = expression_pool(seed=self.seed)
            keys = sorted(pool)
        drawn = self._target(rng, pool, keys)
        if drawn is None:
            return None
        target, pairs = drawn
        parent = random_expression(rng) if rng.random() < self.parent_random \
            else self._parent_near(target, rng, 1 + int(rng.integers(3)))
        children = {c for c in (edit_expression(parent, rng) for _ in range(self.k)) if c is not None}
        if not children:
            return None
        ordered = sorted(children)
        if rng.random() < self.greedy:
            scores = [pass_bits(c, pairs).count("1") for c in ordered]
            ordered = [c for c, s in zip(ordered, scores, strict=True) if s == max(scores)]
        child = ordered[int(rng.integers(len(ordered)))]
        return edit_prompt(pairs, parent, pass_bits(parent, pairs)), child

    def sft_examples(self, rng: np.random.Generator, n: int) -> list[tuple[str, str]]:
        """``n`` ``(prompt, child)`` edit pairs (see the module docstring)."""
        pool = expression_pool(seed=self.seed)
        keys = sorted(pool)
        out: list[tuple[str, str]] = []
        while len(out) < n:
            pair = self.edit_pair(rng, pool, keys)
            if pair is not None:
                out.append(pair)
        return out
