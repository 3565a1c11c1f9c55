"""Diversity experiment 2: many correct answers per prompt.

A prompt ``m=7 r=3 s=12:`` asks for any 3-digit number ``n`` (100..999) with
``n ≡ r (mod m)`` and, when ``s=`` is present, digit sum ``s``. Without a digit-sum
constraint a prompt has about ``900/m`` solutions (~130 for m = 7); with one it has 1 to
a few tens, so prompts range from broad to nearly unique. The answer space is the 900
three-digit strings, small enough to score every answer exactly.

Keys: ``outcome`` = ``semantic`` = the number; ``strategy`` = its first digit (a coarse
stand-in for "strategy", as suggested in §10). Reward 1 for a correct answer, 0 otherwise;
``tests`` has one entry per constraint (residue, digit sum), so a wrong answer can still
satisfy part of the prompt.
"""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np

from qdevolve.rl.tasks.base import Verdict

__all__ = ["MultiAnswerTask", "parse_prompt", "solutions"]

_PROMPT = re.compile(r"^m=(\d+) r=(\d+)(?: s=(\d+))?:$")
ANSWERS: tuple[str, ...] = tuple(str(n) for n in range(100, 1000))


def parse_prompt(prompt: str) -> tuple[int, int, int | None]:
    """``(m, r, s)`` of a prompt; ``s`` is ``None`` without a digit-sum constraint."""
    match = _PROMPT.match(prompt.strip())
    if not match:
        raise ValueError(f"not a multi_answer prompt: {prompt!r} (expected 'm=M r=R[ s=S]:')")
    m, r, s = match.groups()
    return int(m), int(r), None if s is None else int(s)


def _digit_sum(n: int) -> int:
    return sum(int(c) for c in str(n))


@lru_cache(maxsize=4096)
def solutions(m: int, r: int, s: int | None) -> tuple[int, ...]:
    """Every 3-digit solution of ``(m, r, s)``."""
    return tuple(n for n in range(100, 1000) if n % m == r and (s is None or _digit_sum(n) == s))


def _format(m: int, r: int, s: int | None) -> str:
    return f"m={m} r={r}" + ("" if s is None else f" s={s}") + ":"


class MultiAnswerTask:
    """3-digit answers under modular and digit-sum constraints.

    Args:
        n_train: Training prompts (spread over four solution-count bands: 60-130, 15-40,
            4-12 and 1-3 solutions).
        n_test: Held-out prompts drawn the same way.
        seed: Seed of the prompt selection (the task, not the run).
        wrong_fraction: Fraction of random (mostly wrong) answers in the SFT corpus.
        task_fraction: Fraction of SFT examples on this task's own prompts (train and test);
            the rest use random prompts of the same family.
    """

    name = "multi_answer"
    alphabet = "0123456789mrs= :"
    max_new_tokens = 4

    def __init__(self, *, n_train: int = 24, n_test: int = 8, seed: int = 1234,
                 wrong_fraction: float = 0.4, task_fraction: float = 0.7) -> None:
        if n_train < 1 or n_test < 0:
            raise ValueError("MultiAnswerTask needs n_train >= 1 and n_test >= 0")
        self.wrong_fraction, self.task_fraction = wrong_fraction, task_fraction
        rng = np.random.default_rng(seed)
        bands = [(60, 130), (15, 40), (4, 12), (1, 3)]
        pools: list[list[tuple[int, int, int | None]]] = [[] for _ in bands]
        for m in (7, 9, 11, 13):
            for r in range(m):
                for s in [None, *range(1, 28)]:
                    c = len(solutions(m, r, s))
                    for b, (lo, hi) in enumerate(bands):
                        if lo <= c <= hi:
                            pools[b].append((m, r, s))
        total = n_train + n_test
        chosen: list[tuple[int, int, int | None]] = []
        for b, pool in enumerate(pools):
            k = total // len(bands) + (1 if b < total % len(bands) else 0)
            idx = rng.choice(len(pool), size=k, replace=False)
            chosen.extend(pool[i] for i in idx)
        order = rng.permutation(len(chosen))
        chosen = [chosen[i] for i in order]
        # Interleave bands so both splits cover every band.
        chosen.sort(key=lambda t: -len(solutions(*t)))
        test_idx = set(range(0, len(chosen), max(1, len(chosen) // max(n_test, 1)))) if n_test else set()
        test_idx = set(sorted(test_idx)[:n_test])
        self._train = [_format(*t) for i, t in enumerate(chosen) if i not in test_idx]
        self._test = [_format(*t) for i, t in enumerate(chosen) if i in test_idx]

    def prompts(self, split: str = "train") -> list[str]:
        if split not in ("train", "test"):
            raise ValueError(f"split must be 'train' or 'test', got {split!r}")
        return list(self._train if split == "train" else self._test)

    def n_solutions(self, prompt: str) -> int:
        return len(solutions(*parse_prompt(prompt)))

    def verify(self, prompt: str, completion: str) -> Verdict:
        m, r, s = parse_prompt(prompt)
        text = completion.strip()
        if len(text) != 3 or not text.isdigit() or text[0] == "0":
            return Verdict(0.0, np.zeros(1 if s is None else 2), False)
        n = int(text)
        tests = [float(n % m == r)] + ([] if s is None else [float(_digit_sum(n) == s)])
        ok = all(t == 1.0 for t in tests)
        return Verdict(float(ok), np.array(tests), ok, outcome=text, semantic=text, strategy=text[0])

    def answer_space(self, prompt: str) -> list[str] | None:
        return list(ANSWERS)

    def sft_examples(self, rng: np.random.Generator, n: int) -> list[tuple[str, str]]:
        own = [parse_prompt(p) for p in self._train + self._test]
        out: list[tuple[str, str]] = []
        while len(out) < n:
            if rng.random() < self.task_fraction:
                m, r, s = own[int(rng.integers(0, len(own)))]
            else:
                m = int(rng.integers(3, 14))
                r = int(rng.integers(0, m))
                s = int(rng.integers(1, 28)) if rng.random() < 0.6 else None
            sols = solutions(m, r, s)
            if not sols:
                continue
            if rng.random() < self.wrong_fraction:
                ans = int(rng.integers(100, 1000))
            else:
                ans = int(sols[int(rng.integers(0, len(sols)))])
            out.append((_format(m, r, s), str(ans)))
        return out
