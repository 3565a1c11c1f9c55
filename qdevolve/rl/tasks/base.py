"""The :class:`Task` protocol: prompts, a verifier, and the data a tiny base policy needs.

A task is what the inner loop trains on. It owns three things:

* ``prompts(split)``: the prompt texts (``"train"`` is the RL set; ``"test"`` is held out).
* ``verify(prompt, completion) -> Verdict``: a scalar reward, a per-test vector (the VPO
  reward vector), whether the completion is fully correct, and keys naming *which* outcome
  it is (``outcome``: the exact answer; ``semantic``: its behaviour; ``strategy``: a coarse
  shape), used by ``ips``/``rare`` and by the diversity metrics.
* ``sft_examples(rng, n)``: ``(prompt, answer)`` pairs from a *broad* distribution over
  valid and invalid answers, used to pre-train the tiny base policy (``qdevolve.rl.tiny``).

``answer_space(prompt)`` returns every syntactically valid answer when the space is small
enough to enumerate (then exact pass@k, entropy and support are computed by scoring every
answer), else ``None``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["Verdict", "Task"]


@dataclass(frozen=True)
class Verdict:
    """What the verifier says about one completion.

    Attributes:
        reward: Scalar reward (1/0 for exact-answer tasks, fraction of tests passed for
            program tasks).
        tests: Per-test results in [0, 1], shape ``[T]``.
        correct: Whether every test passed.
        outcome: Canonical key of the exact outcome (the answer / normalised program text);
            ``None`` for a malformed completion.
        semantic: Behaviour key (outputs on probe inputs); equals ``outcome`` when the
            answer *is* the behaviour.
        strategy: Coarse strategy key (e.g. operator multiset, first digit).
        candidates: ``[m, T]`` per-candidate test results for multi-candidate completions
            (VPO), else ``None``.
        candidate_keys: Semantic key of each candidate (length m), else empty.
    """

    reward: float
    tests: np.ndarray
    correct: bool
    outcome: str | None = None
    semantic: str | None = None
    strategy: str | None = None
    candidates: np.ndarray | None = None
    candidate_keys: tuple[str | None, ...] = field(default_factory=tuple)


@runtime_checkable
class Task(Protocol):
    """Protocol every task follows (see the module docstring)."""

    name: str
    #: Characters the tokenizer must cover (prompts and answers).
    alphabet: str
    #: Completion length budget in tokens, the end-of-sequence token included.
    max_new_tokens: int

    def prompts(self, split: str = "train") -> list[str]:
        """Prompt texts of a split (``"train"`` or ``"test"``)."""
        ...

    def verify(self, prompt: str, completion: str) -> Verdict:
        """Score one completion of ``prompt``."""
        ...

    def answer_space(self, prompt: str) -> list[str] | None:
        """Every valid answer when enumerable, else ``None``."""
        ...

    def sft_examples(self, rng: np.random.Generator, n: int) -> list[tuple[str, str]]:
        """``n`` broad ``(prompt, answer)`` pairs for pre-training the base policy."""
        ...
