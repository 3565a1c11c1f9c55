"""A skewed few-answer task: 4-8 correct answers per prompt and a Zipf-skewed base corpus.

A prompt ``m=13 r=5:`` asks for any two-digit number ``n`` (10..99) with ``n ≡ r (mod m)``.
*Main* prompts use moduli 11-22, so each has 4 to 8 correct answers; *hard* prompts use
moduli 23-40 (2 to 4 answers) and their pre-training corpus is mostly wrong answers, so the
base policy solves them rarely (the low-pass@1 regime of Yue et al. 2025, arXiv 2504.13837,
where RL's pass@k at large k falls below the base's). The answer space is the 90 two-digit
strings; pass@k and the distribution over correct answers are computed exactly from the
probabilities of the few correct answers.

The pre-training corpus (:meth:`FewAnswerTask.sft_examples`) is deliberately skewed: the
correct answers of a prompt are ranked by a fixed per-prompt permutation and drawn with Zipf
weights ``w_k ∝ k ** -zipf`` (rank k = 1 is the favourite), a ``wrong_fraction`` (main) or
``hard_wrong_fraction`` (hard) of examples are uniformly random two-digit numbers, and a
share of examples come from other prompts of the same family. This is the setting where
expected-return RL shows outcome-level collapse (diversity-rl.md §3): the favourite answer
gets the larger push (``dz_i ∝ p_i (r_i - r̄)``) and the group G = 8 holds the same correct
answer several times, so ``ips`` and ``rare`` see repeated outcomes to count.

Splits: ``train`` / ``test`` (held out from RL, present in pre-training) of the main
prompts, and ``hard_train`` / ``hard_test`` of the hard ones. Keys: ``outcome`` =
``semantic`` = the number; ``strategy`` = its last digit. Reward 1 for a correct answer, 0
otherwise; ``tests`` is the single residue check.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache

import numpy as np

from qdevolve.rl.tasks.base import Verdict

__all__ = ["FewAnswerTask", "SPLITS", "parse_prompt", "solutions", "zipf_order"]

_PROMPT = re.compile(r"^m=(\d+) r=(\d+):$")
ANSWERS: tuple[str, ...] = tuple(str(n) for n in range(10, 100))
SPLITS: tuple[str, ...] = ("train", "test", "hard_train", "hard_test")
MAIN_MODULI = tuple(range(11, 23))
HARD_MODULI = tuple(range(23, 41))


def parse_prompt(prompt: str) -> tuple[int, int]:
    """``(m, r)`` of a prompt."""
    match = _PROMPT.match(prompt.strip())
    if not match:
        raise ValueError(f"not a few_answer prompt: {prompt!r} (expected 'm=M r=R:')")
    return int(match.group(1)), int(match.group(2))


@lru_cache(maxsize=4096)
def solutions(m: int, r: int) -> tuple[int, ...]:
    """Every two-digit solution of ``n ≡ r (mod m)``."""
    return tuple(n for n in range(10, 100) if n % m == r)


def zipf_order(m: int, r: int, seed: int) -> tuple[int, ...]:
    """The prompt's correct answers, favourite first (a fixed pseudo-random permutation)."""
    sols = list(solutions(m, r))
    digest = hashlib.sha256(f"{seed}:{m}:{r}".encode()).digest()
    rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
    return tuple(sols[i] for i in rng.permutation(len(sols)))


def _format(m: int, r: int) -> str:
    return f"m={m} r={r}:"


class FewAnswerTask:
    """Two-digit residue prompts with few answers and a Zipf-skewed base (module docstring).

    Args:
        n_train: Main prompts trained on.
        n_test: Main prompts held out from RL.
        n_hard_train: Hard prompts trained on (the hard variant).
        n_hard_test: Hard prompts held out.
        zipf: Zipf exponent of the correct answers in the corpus.
        wrong_fraction: Share of random answers for main prompts in the corpus.
        hard_wrong_fraction: Share of random answers for hard prompts in the corpus.
        task_fraction: Share of corpus examples on this task's own prompts.
        seed: Seed of the prompt selection and of the favourite orders.
    """

    name = "few_answer"
    alphabet = "0123456789mr= :"
    max_new_tokens = 3

    def __init__(self, *, n_train: int = 16, n_test: int = 8, n_hard_train: int = 12, n_hard_test: int = 6,
                 zipf: float = 1.0, wrong_fraction: float = 0.2, hard_wrong_fraction: float = 0.9,
                 task_fraction: float = 1.0, seed: int = 7) -> None:
        if min(n_train, n_hard_train) < 1 or min(n_test, n_hard_test) < 0:
            raise ValueError("FewAnswerTask needs n_train, n_hard_train >= 1 and n_test, n_hard_test >= 0")
        for name, v in (("wrong_fraction", wrong_fraction), ("hard_wrong_fraction", hard_wrong_fraction),
                        ("task_fraction", task_fraction)):
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"FewAnswerTask.{name} must be in [0, 1], got {v}")
        self.zipf, self.seed = float(zipf), int(seed)
        self.wrong_fraction, self.hard_wrong_fraction = float(wrong_fraction), float(hard_wrong_fraction)
        self.task_fraction = float(task_fraction)
        rng = np.random.default_rng(seed)
        main = [(m, r) for m in MAIN_MODULI for r in range(m) if 4 <= len(solutions(m, r)) <= 8]
        hard = [(m, r) for m in HARD_MODULI for r in range(m) if 2 <= len(solutions(m, r)) <= 4]
        if n_train + n_test > len(main) or n_hard_train + n_hard_test > len(hard):
            raise ValueError(f"FewAnswerTask has {len(main)} main and {len(hard)} hard prompts; asked for more")
        pick = [main[i] for i in rng.choice(len(main), n_train + n_test, replace=False)]
        pick_h = [hard[i] for i in rng.choice(len(hard), n_hard_train + n_hard_test, replace=False)]
        self._splits = {"train": [_format(*t) for t in pick[:n_train]],
                        "test": [_format(*t) for t in pick[n_train:]],
                        "hard_train": [_format(*t) for t in pick_h[:n_hard_train]],
                        "hard_test": [_format(*t) for t in pick_h[n_hard_train:]]}

    def prompts(self, split: str = "train") -> list[str]:
        if split not in SPLITS:
            raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
        return list(self._splits[split])

    def correct_answers(self, prompt: str) -> list[str]:
        """The prompt's correct answers, the corpus favourite first."""
        return [str(n) for n in zipf_order(*parse_prompt(prompt), self.seed)]

    def verify(self, prompt: str, completion: str) -> Verdict:
        m, r = parse_prompt(prompt)
        text = completion.strip()
        if len(text) != 2 or not text.isdigit() or text[0] == "0":
            return Verdict(0.0, np.zeros(1), False)
        ok = int(text) % m == r
        return Verdict(float(ok), np.array([float(ok)]), ok, outcome=text, semantic=text, strategy=text[1])

    def answer_space(self, prompt: str) -> list[str] | None:
        return list(ANSWERS)

    def sft_examples(self, rng: np.random.Generator, n: int) -> list[tuple[str, str]]:
        own = [parse_prompt(p) for split in SPLITS for p in self._splits[split]]
        out: list[tuple[str, str]] = []
        while len(out) < n:
            if rng.random() < self.task_fraction:
                m, r = own[int(rng.integers(0, len(own)))]
            else:
                m = int(rng.choice(MAIN_MODULI + HARD_MODULI))
                r = int(rng.integers(0, m))
            sols = zipf_order(m, r, self.seed)
            if not sols:
                continue
            wrong = self.hard_wrong_fraction if m in HARD_MODULI else self.wrong_fraction
            if rng.random() < wrong:
                ans = int(rng.integers(10, 100))
            else:
                w = np.arange(1, len(sols) + 1, dtype=np.float64) ** -self.zipf
                ans = sols[int(rng.choice(len(sols), p=w / w.sum()))]
            out.append((_format(m, r), str(ans)))
        return out
