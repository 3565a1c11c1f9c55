"""Diversity experiment 1: the K-correct-answers bandit.

One prompt, 16 outcomes: ``0``..``7`` are correct (r = 1), ``8``..``15`` wrong (r = 0).
The policy is tabular, ``p = softmax(z)`` over 16 logits, with a skewed start: the
correct outcomes' logits follow a Zipf profile ``z_i = log(1 / (i + 1)^s)`` (s = 1.5 by
default) and the wrong outcomes share a logit chosen so that the base pass@1 is
``base_pass1``. Under expected-return maximisation ``dz_i/dt = p_i (r_i - r̄)`` (the
"rich get richer" flow), so GRPO is expected to collapse onto outcome ``0``.

The task follows the :class:`~qdevolve.rl.tasks.base.Task` protocol so the same metrics
apply; :class:`TabularPolicy` is the policy used in the benchmark (a ``torch`` module whose
per-sample log-probabilities feed the trainer's shared surrogate loss).
"""

from __future__ import annotations

import numpy as np
import torch

from qdevolve.rl.tasks.base import Verdict

__all__ = ["BanditTask", "TabularPolicy"]


class BanditTask:
    """16-outcome bandit with 8 correct outcomes and a Zipf-skewed base policy.

    Args:
        n_correct: Correct outcomes (the first ``n_correct`` ids).
        n_wrong: Wrong outcomes.
        zipf: Zipf exponent of the base probabilities over the correct outcomes.
        base_pass1: Base probability mass on correct outcomes.
    """

    name = "bandit"
    alphabet = "0123456789bandit:"
    max_new_tokens = 3

    def __init__(self, *, n_correct: int = 8, n_wrong: int = 8, zipf: float = 1.5,
                 base_pass1: float = 0.5) -> None:
        if n_correct < 1 or n_wrong < 0:
            raise ValueError("BanditTask needs n_correct >= 1 and n_wrong >= 0")
        if not 0.0 < base_pass1 <= 1.0:
            raise ValueError(f"base_pass1 must be in (0, 1], got {base_pass1}")
        self.n_correct, self.n_wrong, self.zipf, self.base_pass1 = n_correct, n_wrong, zipf, base_pass1

    @property
    def n_outcomes(self) -> int:
        return self.n_correct + self.n_wrong

    def prompts(self, split: str = "train") -> list[str]:
        return ["bandit:"]

    def rewards(self) -> np.ndarray:
        """Reward of each outcome id, shape ``[K]``."""
        return (np.arange(self.n_outcomes) < self.n_correct).astype(np.float64)

    def base_probs(self) -> np.ndarray:
        """The skewed start distribution over outcome ids."""
        w = 1.0 / (np.arange(1, self.n_correct + 1) ** self.zipf)
        correct = self.base_pass1 * w / w.sum()
        wrong = np.full(self.n_wrong, (1.0 - self.base_pass1) / max(self.n_wrong, 1))
        return np.concatenate([correct, wrong])[: self.n_outcomes]

    def base_logits(self) -> np.ndarray:
        p = np.clip(self.base_probs(), 1e-12, None)
        return np.log(p) - np.log(p).mean()

    def verify(self, prompt: str, completion: str) -> Verdict:
        text = completion.strip()
        if not text.isdigit() or int(text) >= self.n_outcomes:
            return Verdict(0.0, np.zeros(1), False)
        ok = int(text) < self.n_correct
        return Verdict(float(ok), np.array([float(ok)]), ok, outcome=text, semantic=text,
                       strategy=str(int(text) % 4))

    def answer_space(self, prompt: str) -> list[str] | None:
        return [str(i) for i in range(self.n_outcomes)]

    def sft_examples(self, rng: np.random.Generator, n: int) -> list[tuple[str, str]]:
        ids = rng.choice(self.n_outcomes, size=n, p=self.base_probs())
        return [("bandit:", str(i)) for i in ids]


class TabularPolicy(torch.nn.Module):
    """``p = softmax(z)`` over a fixed set of outcomes (a one-token 'language model').

    Args:
        logits: Initial logits, shape ``[K]``.
    """

    def __init__(self, logits: np.ndarray) -> None:
        super().__init__()
        self.logits = torch.nn.Parameter(torch.as_tensor(np.asarray(logits), dtype=torch.float32).clone())

    def probs(self) -> np.ndarray:
        with torch.no_grad():
            return torch.softmax(self.logits, -1).double().numpy()

    def log_probs(self, outcomes: torch.Tensor) -> torch.Tensor:
        """Log-probability of each outcome id in ``outcomes`` (shape ``[B]``)."""
        return torch.log_softmax(self.logits, -1)[outcomes]

    def sample(self, n: int, generator: torch.Generator) -> torch.Tensor:
        with torch.no_grad():
            return torch.multinomial(torch.softmax(self.logits, -1), n, replacement=True, generator=generator)
