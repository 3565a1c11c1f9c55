"""Diversity experiment 3: integer functions from I/O examples.

A prompt lists input/output pairs of an integer function, ``0>2,1>4,2>6,3>8,5>12:``, and
the answer is an expression in a tiny DSL::

    expr   := term (("+" | "-") term)*
    term   := factor ("*" factor)*
    factor := "x" | "1" | "2" | "3" | "(" expr ")"

of at most :data:`MAX_LEN` characters. :func:`evaluate` is a pure recursive-descent
evaluator (no Python ``eval``; integers only; depth and magnitude bounded), reusable by
``examples/expr_evolution``. Many programs are equivalent (``x+x+2``, ``2*x+2``,
``(x+1)*2``); the keys separate them:

* ``outcome`` (syntactic): the expression text without spaces;
* ``semantic``: the tuple of outputs on :data:`PROBES` (the equivalence class);
* ``strategy``: the operator multiset plus the parenthesis count (a coarse AST shape).

``tests`` has one pass bit per I/O pair; the scalar reward is the fraction passed and
``correct`` means all passed. Some tasks are *partial-credit* tasks: their examples mix
two functions (e.g. ``x*x`` on some inputs, ``2*x`` on others) so no short program passes
every test but different programs pass different subsets, which is where VPO's set
objective matters. With ``candidates = m > 1`` the prompt ends in ``#m:`` and a
completion holds up to ``m`` expressions separated by ``;`` (VPO's multi-answer rollout);
``Verdict.candidates`` then has shape ``[m, T]``.
"""

from __future__ import annotations

from collections import Counter
from functools import lru_cache

import numpy as np

from qdevolve.rl.tasks.base import Verdict

__all__ = ["DSLError", "parse", "evaluate", "semantic_key", "strategy_key", "random_expression",
           "expression_pool", "ExprDSLTask", "PROBES", "MAX_LEN"]

MAX_LEN = 9
PROBES: tuple[int, ...] = tuple(range(-4, 12))
_LIMIT = 10**9
_ATOMS = ("x", "1", "2", "3")


class DSLError(ValueError):
    """The text is not a well-formed DSL expression (or its value is out of range)."""


# Syntax tree: ("x",), ("c", int), (op, left, right) with op in "+-*".
Node = tuple


def parse(text: str) -> Node:
    """Parse an expression into a tree; raises :class:`DSLError` on any syntax error."""
    s = text.replace(" ", "")
    if not s:
        raise DSLError("empty expression")
    pos = 0

    def peek() -> str:
        return s[pos] if pos < len(s) else ""

    def expr(depth: int) -> Node:
        nonlocal pos
        if depth > 20:
            raise DSLError("expression nested too deeply")
        node = term(depth)
        while peek() in ("+", "-") and peek():
            op = s[pos]
            pos += 1
            node = (op, node, term(depth))
        return node

    def term(depth: int) -> Node:
        nonlocal pos
        node = factor(depth)
        while peek() == "*":
            pos += 1
            node = ("*", node, factor(depth))
        return node

    def factor(depth: int) -> Node:
        nonlocal pos
        c = peek()
        if c == "x":
            pos += 1
            return ("x",)
        if c in ("1", "2", "3"):
            pos += 1
            return ("c", int(c))
        if c == "(":
            pos += 1
            node = expr(depth + 1)
            if peek() != ")":
                raise DSLError(f"missing ')' at position {pos} in {text!r}")
            pos += 1
            return node
        raise DSLError(f"unexpected {c or 'end'!r} at position {pos} in {text!r}")

    tree = expr(0)
    if pos != len(s):
        raise DSLError(f"unexpected {s[pos]!r} at position {pos} in {text!r}")
    return tree


def _eval(node: Node, x: int) -> int:
    kind = node[0]
    if kind == "x":
        return x
    if kind == "c":
        return node[1]
    a, b = _eval(node[1], x), _eval(node[2], x)
    v = a + b if kind == "+" else a - b if kind == "-" else a * b
    if abs(v) > _LIMIT:
        raise DSLError("value out of range")
    return v


def evaluate(expression: str | Node, x: int) -> int:
    """Value of ``expression`` at integer ``x`` (pure; raises :class:`DSLError`)."""
    tree = parse(expression) if isinstance(expression, str) else expression
    return _eval(tree, int(x))


def semantic_key(expression: str | Node) -> str:
    """Outputs on :data:`PROBES`, comma-joined: equal keys mean equivalent programs here."""
    tree = parse(expression) if isinstance(expression, str) else expression
    return ",".join(str(_eval(tree, x)) for x in PROBES)


def strategy_key(expression: str) -> str:
    """Operator multiset and parenthesis count, e.g. ``"*1+1()0"``."""
    s = expression.replace(" ", "")
    ops = Counter(c for c in s if c in "+-*")
    return "".join(f"{op}{ops[op]}" for op in "+-*" if ops[op]) + f"(){s.count('(')}"


def _render(node: Node, parent_prec: int = 0, right: bool = False) -> str:
    kind = node[0]
    if kind == "x":
        return "x"
    if kind == "c":
        return str(node[1])
    prec = 2 if kind == "*" else 1
    text = _render(node[1], prec) + kind + _render(node[2], prec, right=True)
    need = prec < parent_prec or (right and prec == parent_prec and kind in "-+" and parent_prec == 1)
    return f"({text})" if need else text


def random_expression(rng: np.random.Generator, max_len: int = MAX_LEN, p_leaf: float = 0.45) -> str:
    """A random well-formed expression of at most ``max_len`` characters."""
    def grow(depth: int) -> Node:
        if depth >= 3 or rng.random() < p_leaf:
            a = _ATOMS[int(rng.integers(0, 4))] if rng.random() < 0.6 else "x"
            return ("x",) if a == "x" else ("c", int(a))
        op = "+-*"[int(rng.integers(0, 3))]
        return (op, grow(depth + 1), grow(depth + 1))

    while True:
        text = _render(grow(0))
        if len(text) <= max_len:
            return text


@lru_cache(maxsize=4)
def expression_pool(n_samples: int = 60000, seed: int = 0) -> dict[str, tuple[str, ...]]:
    """Distinct random expressions grouped by semantic key (for SFT data and task design)."""
    rng = np.random.default_rng(seed)
    seen: set[str] = set()
    pool: dict[str, list[str]] = {}
    for _ in range(n_samples):
        e = random_expression(rng)
        if e in seen:
            continue
        seen.add(e)
        pool.setdefault(semantic_key(e), []).append(e)
    return {k: tuple(v) for k, v in pool.items()}


def _io_text(pairs: list[tuple[int, int]]) -> str:
    return ",".join(f"{x}>{y}" for x, y in pairs)


# (name, I/O pairs). Single-function tasks: the target is a short program. Mixed tasks:
# outputs come from two functions, so different programs pass different test subsets.
_INPUTS = (0, 1, 2, 3, 5)
_SINGLE = ("2*x+2", "x*x", "x*x+1", "3*x", "x+3", "x*x-x", "2*x-1", "x*3+3", "x*x+x", "2*x*x",
           "x*x-1", "(x+1)*(x+1)")
_MIXED = (("x*x", "2*x", (0, 1, 2, 3, 5), (0, 0, 0, 1, 1)),
          ("x+1", "2*x", (0, 1, 2, 3, 5), (0, 1, 0, 1, 0)),
          ("x*x", "x+2", (0, 1, 2, 3, 5), (1, 0, 1, 0, 1)),
          ("3*x", "x*x", (0, 1, 2, 3, 5), (0, 0, 1, 1, 1)))


def _train_tasks() -> list[list[tuple[int, int]]]:
    tasks = [[(x, evaluate(f, x)) for x in _INPUTS] for f in _SINGLE]
    for f, g, xs, which in _MIXED:
        tasks.append([(x, evaluate(g if w else f, x)) for x, w in zip(xs, which, strict=True)])
    return tasks


class ExprDSLTask:
    """Integer-function synthesis from I/O examples, scored per test.

    Args:
        candidates: Expressions per completion (``m``; VPO uses 3).
        seed: Seed of the SFT corpus' expression pool.
        task_fraction: Fraction of SFT examples on this task's own prompts (train and test),
            answered with a uniformly drawn pool program within 0.2 of the best reward
            (60 %) or a random program; the rest use random targets.
    """

    name = "expr_dsl"
    alphabet = "0123456789x+-*(),>:;#"

    def __init__(self, *, candidates: int = 1, seed: int = 0, task_fraction: float = 0.7) -> None:
        if candidates < 1:
            raise ValueError(f"candidates must be >= 1, got {candidates}")
        self.candidates = candidates
        self.seed = seed
        self.task_fraction = task_fraction
        self._good: dict[str, tuple[str, ...]] = {}
        self.max_new_tokens = candidates * (MAX_LEN + 1)
        self._tasks = _train_tasks()

    def _suffix(self) -> str:
        return f"#{self.candidates}:" if self.candidates > 1 else ":"

    def prompts(self, split: str = "train") -> list[str]:
        if split not in ("train", "test"):
            raise ValueError(f"split must be 'train' or 'test', got {split!r}")
        tasks = self._tasks if split == "train" else [
            [(x, evaluate(f, x)) for x in _INPUTS] for f in ("x+x+x+1", "x*x+2", "3*x-1")]
        return [_io_text(t) + self._suffix() for t in tasks]

    @staticmethod
    def parse_prompt(prompt: str) -> tuple[list[tuple[int, int]], int]:
        """``(I/O pairs, m)`` of a prompt."""
        body = prompt.strip().rstrip(":")
        m = 1
        if "#" in body:
            body, m_text = body.split("#", 1)
            m = int(m_text)
        pairs = []
        for item in body.split(","):
            x, y = item.split(">", 1)
            pairs.append((int(x), int(y)))
        return pairs, m

    def _score_one(self, pairs: list[tuple[int, int]], text: str) -> tuple[np.ndarray, str | None, str | None, str | None]:
        text = text.strip().replace(" ", "")
        if not text or len(text) > MAX_LEN:
            return np.zeros(len(pairs)), None, None, None
        try:
            tree = parse(text)
            tests = np.array([float(_eval(tree, x) == y) for x, y in pairs])
            sem = semantic_key(tree)
        except DSLError:
            return np.zeros(len(pairs)), None, None, None
        return tests, text, sem, strategy_key(text)

    def verify(self, prompt: str, completion: str) -> Verdict:
        pairs, m = self.parse_prompt(prompt)
        if m == 1:
            tests, outcome, sem, strat = self._score_one(pairs, completion)
            return Verdict(float(tests.mean()), tests, bool(tests.all()), outcome, sem, strat)
        parts = completion.split(";")[:m]
        scored = [self._score_one(pairs, p) for p in parts]
        while len(scored) < m:
            scored.append((np.zeros(len(pairs)), None, None, None))
        cand = np.stack([s[0] for s in scored])
        best = int(np.argmax(cand.mean(axis=1)))
        tests = cand.max(axis=0)
        return Verdict(float(cand.mean(axis=1).max()), tests, bool(cand.all(axis=1).any()),
                       scored[best][1], scored[best][2], scored[best][3], candidates=cand,
                       candidate_keys=tuple(s[2] for s in scored))

    def answer_space(self, prompt: str) -> list[str] | None:
        return None

    def good_programs(self, io_text: str) -> tuple[str, ...]:
        """Pool programs within 0.2 of the best fraction of tests passed on ``io_text``."""
        if io_text not in self._good:
            pairs, _ = self.parse_prompt(io_text + ":")
            pool = expression_pool(seed=self.seed)
            scored = []
            for exprs in pool.values():
                tree = parse(exprs[0])
                frac = float(np.mean([_eval(tree, x) == y for x, y in pairs]))
                scored.extend((frac, e) for e in exprs)
            best = max(f for f, _ in scored)
            self._good[io_text] = tuple(e for f, e in scored if f >= best - 0.2 + 1e-9)
        return self._good[io_text]

    def sft_examples(self, rng: np.random.Generator, n: int) -> list[tuple[str, str]]:
        pool = expression_pool(seed=self.seed)
        keys = sorted(pool)
        own = [p.rsplit("#", 1)[0].rstrip(":") for p in self.prompts("train") + self.prompts("test")]
        out: list[tuple[str, str]] = []
        while len(out) < n:
            if rng.random() < self.task_fraction:
                io = own[int(rng.integers(0, len(own)))]
                good = self.good_programs(io)
                m = 3 if rng.random() < 0.3 else 1
                answers = [good[int(rng.integers(0, len(good)))] if rng.random() < 0.6 else random_expression(rng)
                           for _ in range(m)]
                out.append((io + (f"#{m}:" if m > 1 else ":"), ";".join(answers)))
                continue
            key = keys[int(rng.integers(0, len(keys)))]
            target = pool[key][0]
            xs = sorted(rng.choice(np.arange(0, 8), size=5, replace=False).tolist())
            try:
                pairs = [(x, evaluate(target, x)) for x in xs]
            except DSLError:
                continue
            if any(abs(y) > 999 for _, y in pairs):
                continue
            m = 3 if rng.random() < 0.3 else 1
            answers = []
            for _ in range(m):
                if rng.random() < 0.55:
                    answers.append(pool[key][int(rng.integers(0, len(pool[key])))])
                else:
                    answers.append(random_expression(rng))
            out.append((_io_text(pairs) + (f"#{m}:" if m > 1 else ":"), ";".join(answers)))
        return out
