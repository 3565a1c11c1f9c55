"""What an agents run reports: the best agent against the seed agent on the held-out tasks.

The best agent is the one with the highest score (scoring tasks only, the score selection
saw); the held-out tasks are compared afterwards, so the comparison is an honest test of
whether self-improvement generalised. Read from the store alone, so ``qdevolve resume`` and a
finished run's database report the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from qdevolve.agents.benchmark import HELDOUT_PREFIX

__all__ = ["HeldoutComparison", "heldout_comparison", "agent_rows", "heldout_curve"]


@dataclass(frozen=True)
class HeldoutComparison:
    """The seed agent and the best agent's held-out figures."""

    seed_id: str
    seed_heldout: float | None
    best_id: str
    best_score: float
    best_heldout: float | None
    tasks: tuple[str, ...]  # held-out task names

    @property
    def beats_seed(self) -> bool | None:
        if self.seed_heldout is None or self.best_heldout is None:
            return None
        return self.best_heldout > self.seed_heldout

    def verdict(self) -> str:
        """One line saying whether the best agent beats the seed agent on the held-out tasks."""
        if not self.tasks:
            return "no held-out tasks configured: nothing to compare"
        if self.best_id == self.seed_id:
            return (f"did not beat the seed agent: no child agent scored above it on the scoring tasks "
                    f"(held-out {self._fmt(self.seed_heldout)})")
        word = "beats" if self.beats_seed else "did not beat"
        return (f"best agent {word} the seed agent on the held-out tasks: {self._fmt(self.best_heldout)} vs "
                f"{self._fmt(self.seed_heldout)} (mean normalised improvement on {', '.join(self.tasks)})")

    @staticmethod
    def _fmt(v: float | None) -> str:
        return "-" if v is None else f"{v:.4f}"


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


def heldout_comparison(store: Any, run_id: str) -> HeldoutComparison | None:
    """The comparison for a stored agents run (``None`` when the seed has no evaluation)."""
    seed = best = None
    for _seq, prog, res in store.iter_evaluated(run_id):
        if not res.ok or res.score is None:
            continue
        if prog.operator == "seed" and seed is None:
            seed = (prog.id, res)
        if best is None or res.score > best[1].score:
            best = (prog.id, res)
    if seed is None or best is None:
        return None
    seed_h, tasks = _heldout(seed[1].metrics)
    best_h, _ = _heldout(best[1].metrics)
    return HeldoutComparison(seed_id=seed[0], seed_heldout=seed_h, best_id=best[0], best_score=float(best[1].score),
                             best_heldout=best_h, tasks=tasks)


def agent_rows(store: Any, run_id: str) -> list[tuple[str, str]]:
    """``(what, value)`` rows for the run summary."""
    cmp = heldout_comparison(store, run_id)
    if cmp is None:
        return [("agents", "no scored agent")]
    return [("best agent", f"{cmp.best_id} (score {cmp.best_score:.4f} on the scoring tasks)"),
            ("held-out", cmp.verdict())]
