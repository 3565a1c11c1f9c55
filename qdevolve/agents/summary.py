"""What an agents run reports: the best agent against the seed agent on the held-out tasks.

The best agent is the one with the highest score (scoring tasks only, the score selection
saw); the held-out tasks are compared afterwards, so the comparison is an honest test of
whether self-improvement generalised. One scoring is a noisy sample (each agent call draws
its own mutations), so the verdict rests on several *draws*: the held-out figure stored during
the run is the first, and a ``rescore`` callable supplies the others (the ``agents``
executor scores the two agents again with other mutation draws). The verdict is the
difference best − seed with a bootstrap interval (:func:`qdevolve.agents.interval.difference`):
"within noise" when the interval contains 0. Without ``rescore`` only the stored draw is read
(the store alone), and there is no interval.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from qdevolve.agents.benchmark import HELDOUT_PREFIX
from qdevolve.agents.interval import Difference, difference, mean_interval

__all__ = ["HeldoutComparison", "heldout_comparison", "agent_rows", "heldout_curve", "Rescore"]

Rescore = Callable[[list[tuple[str, int]]], list[float]]
"""Scores ``(agent code, draw index >= 1)`` pairs on the held-out tasks: their mean normalised
improvements, in order."""


@dataclass(frozen=True)
class HeldoutComparison:
    """The seed agent and the best agent's held-out draws (mean normalised improvement each)."""

    seed_id: str
    best_id: str
    best_score: float
    tasks: tuple[str, ...]  # held-out task names
    seed_draws: tuple[float, ...] = ()
    best_draws: tuple[float, ...] = ()
    children: int = 0  # child agents evaluated

    @property
    def seed_heldout(self) -> float | None:
        return sum(self.seed_draws) / len(self.seed_draws) if self.seed_draws else None

    @property
    def best_heldout(self) -> float | None:
        return sum(self.best_draws) / len(self.best_draws) if self.best_draws else None

    @property
    def difference(self) -> Difference | None:
        """best − seed over the draws (``None`` when the best agent is the seed agent or a side
        has no held-out figure)."""
        if self.best_id == self.seed_id or not self.seed_draws or not self.best_draws:
            return None
        return difference(self.best_draws, self.seed_draws)

    @property
    def beats_seed(self) -> bool | None:
        """True when the interval lies above 0, False when it contains 0 or lies below,
        ``None`` without an interval."""
        d = self.difference
        if d is None or not d.has_interval:
            return None
        return d.sign > 0

    def verdict(self) -> str:
        """One line from the numbers: the difference, its interval and whether it is noise."""
        if not self.tasks:
            return "no held-out tasks configured: nothing to compare"
        on = f"mean normalised improvement on {', '.join(self.tasks)}"
        if self.best_id == self.seed_id:
            mean, lo, hi = mean_interval(self.seed_draws)
            span = f", 90 % interval [{lo:.4f}, {hi:.4f}]" if lo is not None and hi is not None else ""
            who = ("seed agent alone (no child agent evaluated)" if self.children == 0 else
                   f"the best agent is the seed agent (none of {self.children} child agents scored above it "
                   "on the scoring tasks)")
            return f"{who}: held-out {mean:.4f}{span} over {len(self.seed_draws)} draws ({on})"
        d = self.difference
        if d is None:
            return f"best agent {self.best_id[:12]} or the seed agent has no held-out figure ({on})"
        return (f"best − seed agent: {d.text()} (best {self.best_heldout:.4f}, seed {self.seed_heldout:.4f}; "
                f"{on})")


def _heldout(metrics: dict[str, Any]) -> tuple[float | None, tuple[str, ...]]:
    names = tuple(sorted(k[len(HELDOUT_PREFIX):] for k in metrics if k.startswith(HELDOUT_PREFIX)))
    if not names:
        return None, ()
    return sum(float(metrics[HELDOUT_PREFIX + n]) for n in names) / len(names), names


def heldout_curve(store: Any, run_id: str) -> list[tuple[int, float, float | None]]:
    """``(children evaluated, best score so far, that best agent's held-out mean)`` after each
    evaluation, in evaluation order (the seed is 0)."""
    out: list[tuple[int, float, float | None]] = []
    best: float | None = None
    best_heldout: float | None = None
    n = 0
    for _seq, prog, res in store.iter_evaluated(run_id):
        if prog.operator != "seed":
            n += 1
        if res.ok and res.score is not None and (best is None or res.score > best):
            best, best_heldout = float(res.score), _heldout(res.metrics)[0]
        if best is not None:
            out.append((n, best, best_heldout))
    return out


def _draws(first: float | None, code: str, draws: int, rescore: Rescore | None,
           done: dict[str, list[float]]) -> tuple[float, ...]:
    if first is None:
        return ()
    return (first, *done.get(code, [])) if rescore is not None and draws > 1 else (first,)


def heldout_comparison(store: Any, run_id: str, *, draws: int = 1,
                       rescore: Rescore | None = None) -> HeldoutComparison | None:
    """The comparison for a stored agents run (``None`` when the seed has no evaluation).

    Args:
        store: The run's store.
        run_id: The run.
        draws: Held-out figures per agent (the stored one and ``draws - 1`` from ``rescore``).
        rescore: Scores further draws; ``None``: the stored draw only.
    """
    seed = best = None
    children = 0
    for _seq, prog, res in store.iter_evaluated(run_id):
        children += prog.operator != "seed"
        if not res.ok or res.score is None:
            continue
        if prog.operator == "seed" and seed is None:
            seed = (prog, res)
        if best is None or res.score > best[1].score:
            best = (prog, res)
    if seed is None or best is None:
        return None
    seed_h, tasks = _heldout(seed[1].metrics)
    best_h, _ = _heldout(best[1].metrics)
    codes = [seed[0].code] if best[0].id == seed[0].id else [best[0].code, seed[0].code]
    done: dict[str, list[float]] = {}
    if rescore is not None and draws > 1 and tasks and seed_h is not None and best_h is not None:
        jobs = [(code, d) for code in codes for d in range(1, draws)]
        for (code, _d), value in zip(jobs, rescore(jobs), strict=True):
            done.setdefault(code, []).append(float(value))
    return HeldoutComparison(seed_id=seed[0].id, best_id=best[0].id, best_score=float(best[1].score), tasks=tasks,
                             seed_draws=_draws(seed_h, seed[0].code, draws, rescore, done),
                             best_draws=_draws(best_h, best[0].code, draws, rescore, done), children=children)


def agent_rows(store: Any, run_id: str, *, draws: int = 1,
               rescore: Rescore | None = None) -> list[tuple[str, str]]:
    """``(what, value)`` rows for the run summary."""
    cmp = heldout_comparison(store, run_id, draws=draws, rescore=rescore)
    if cmp is None:
        return [("agents", "no scored agent")]
    return [("best agent", f"{cmp.best_id} (score {cmp.best_score:.4f} on the scoring tasks)"),
            ("held-out", cmp.verdict())]
