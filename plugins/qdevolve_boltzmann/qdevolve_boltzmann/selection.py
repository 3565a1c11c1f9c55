"""Boltzmann (softmax) parent selection.

    p_i = exp((s_i - max_j s_j) / T) / sum_k exp((s_k - max_j s_j) / T)

with s_i an elite's score and T > 0 the temperature: T -> 0 is greedy, T -> inf uniform.
Scores are optionally standardised first (``normalize=True``) so T is scale-free. This is
the classic Boltzmann selection of evolutionary computation (de la Maza & Tidor, 1993).

Uses only qdevolve's public registry: it is found through the entry point
``qdevolve.selection: boltzmann`` once installed, or loaded with ``--plugin`` from this file.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from qdevolve import registry
from qdevolve.types import Elite


@registry.selection("boltzmann")
class BoltzmannSelection:
    """Pick parents with probability proportional to exp(score / temperature)."""

    def __init__(self, *, temperature: float = 1.0, normalize: bool = True) -> None:
        if not temperature > 0:
            raise ValueError(f"boltzmann: temperature must be > 0, got {temperature}")
        self.temperature = float(temperature)
        self.normalize = bool(normalize)

    def probabilities(self, candidates: Sequence[Elite]) -> np.ndarray:
        scores = np.array([c.score for c in candidates], dtype=np.float64)
        if self.normalize and len(scores) > 1 and scores.std() > 0:
            scores = (scores - scores.mean()) / scores.std()
        z = (scores - scores.max()) / self.temperature
        w = np.exp(z)
        return w / w.sum()

    def select(self, candidates: Sequence[Elite], rng: np.random.Generator, n: int = 1) -> list[Elite]:
        if not candidates:
            raise ValueError("boltzmann: no candidates to select from (is the archive empty?)")
        idx = rng.choice(len(candidates), size=n, replace=True, p=self.probabilities(candidates))
        return [candidates[i] for i in idx]
