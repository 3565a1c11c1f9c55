"""Huxley-Gödel Machine parent selection: Thompson sampling over clade metaproductivity.

The Huxley-Gödel Machine (Wang et al. 2025, "Huxley-Gödel Machine: Human-Level Coding Agent
Development by an Approximation of the Optimal Self-Improving Machine", arXiv 2510.21614)
scores an agent not by its own benchmark score but by how well its *clade* (itself and all
its descendants) does: its clade-metaproductivity (CMP). With ``S_i`` successes and ``F_i``
failures over clade ``i`` (from the ``dgm`` archive's clade statistics,
``Elite.clade_successes`` and ``Elite.clade_trials - Elite.clade_successes``), each draw
samples, for every candidate,

    theta_i ~ Beta(tau * (1 + S_i), tau * (1 + F_i))

and picks ``argmax_i theta_i`` (ties to the earlier candidate). ``tau > 0`` scales the
evidence: large ``tau`` concentrates each posterior around its mean (exploit), small ``tau``
widens it (explore). A clade with no trials yet draws from ``Beta(tau, tau)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from qdevolve import registry
from qdevolve.errors import ConfigError
from qdevolve.selection.rules import SelectionRule, _check
from qdevolve.types import Elite

__all__ = ["HGMSelection", "clade_counts"]


def clade_counts(candidates: Sequence[Elite]) -> tuple[np.ndarray, np.ndarray]:
    """``(successes, failures)`` of each candidate's clade.

    Raises:
        ConfigError: a candidate carries no clade statistics (the archive is not ``dgm``).
    """
    succ, fail = np.zeros(len(candidates)), np.zeros(len(candidates))
    for i, c in enumerate(candidates):
        if c.clade_successes is None or c.clade_trials is None:
            raise ConfigError(
                f"hgm selection needs clade statistics, and program {c.program_id} has none: its archive "
                "does not keep them; use the dgm archive (archive: {type: dgm}), the one that does")
        succ[i] = max(float(c.clade_successes), 0.0)
        fail[i] = max(float(c.clade_trials) - succ[i], 0.0)
    return succ, fail


@registry.selection("hgm")
class HGMSelection(SelectionRule):
    """Huxley-Gödel Machine selection: the candidate whose clade wins a Thompson draw.

    Each draw samples ``theta_i ~ Beta(tau * (1 + S_i), tau * (1 + F_i))`` over the clade
    successes ``S_i`` and failures ``F_i`` of every candidate and takes the argmax (module
    docstring; Wang et al. 2025, arXiv 2510.21614). ``n`` parents are ``n`` draws, each over
    the candidates not chosen yet while any remain, then over all of them. Only ``rng`` is
    drawn from, so a seeded run selects the same parents.

    What the paper's algorithm has that this rule leaves out: HGM decides at each step
    whether to *expand* (make a child of a selected agent) or *evaluate* (run an existing
    agent on one more benchmark task), decoupling the two so they run asynchronously and a
    weak agent stops being evaluated early; it varies its sampling temperature over the run;
    and it picks the final agent by its own estimated score rather than by its clade. Here
    every child is evaluated in full by the loop, ``tau`` is fixed, and the rule only picks
    the parent to expand.

    Args:
        tau: Evidence scale (> 0) of the Beta posteriors.

    Raises:
        ConfigError: ``tau`` is not a positive number, or (when selecting) the candidates
            carry no clade statistics (an archive other than ``dgm``).
    """

    name = "hgm"

    def __init__(self, tau: float = 1.0) -> None:
        try:
            value = float(tau)
        except (TypeError, ValueError):
            raise ConfigError(f"hgm selection tau must be a number > 0, got {tau!r}") from None
        if not np.isfinite(value) or value <= 0:
            raise ConfigError(f"hgm selection tau must be a finite number > 0, got {tau!r}")
        self.tau = value

    def posterior(self, candidates: Sequence[Elite]) -> tuple[np.ndarray, np.ndarray]:
        """The Beta parameters ``(a_i, b_i)`` of each candidate's draw."""
        succ, fail = clade_counts(candidates)
        return self.tau * (1.0 + succ), self.tau * (1.0 + fail)

    def weights(self, candidates: Sequence[Elite]) -> np.ndarray:
        """Posterior means ``a_i / (a_i + b_i)`` (for display; :meth:`select` samples)."""
        a, b = self.posterior(candidates)
        return a / (a + b)

    def probabilities(self, candidates: Sequence[Elite], draws: int = 4000) -> np.ndarray:
        """Single-draw selection probabilities, estimated from ``draws`` Thompson draws of a
        fixed-seed generator (no closed form exists for the argmax of Beta draws)."""
        a, b = self.posterior(candidates)
        theta = np.random.default_rng(0).beta(a, b, size=(draws, len(candidates)))
        return np.bincount(theta.argmax(1), minlength=len(candidates)) / draws

    def select(self, candidates: Sequence[Elite], rng: np.random.Generator, n: int = 1) -> list[Elite]:
        _check(candidates, n)
        a, b = self.posterior(candidates)
        chosen: list[int] = []
        for _ in range(n):
            pool = np.array([i for i in range(len(candidates)) if i not in chosen] or range(len(candidates)))
            theta = rng.beta(a[pool], b[pool])
            chosen.append(int(pool[int(np.argmax(theta))]))
        return [candidates[i] for i in chosen]
