"""What a finished (or stopped) run reports, read from its ledger and archive."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["RunSummary", "summarize"]


@dataclass
class RunSummary:
    """What a finished (or stopped) run reports."""

    run_id: str
    db: str
    evaluations: int
    budget: int
    seed_score: float | None
    best_score: float | None
    best_program_id: str | None
    by_status: dict[str, int]
    elapsed_s: float
    stats: dict[str, Any] = field(default_factory=dict)
    stop_reason: str = "budget"

    @property
    def gain(self) -> float | None:
        if self.best_score is None or self.seed_score is None:
            return None
        return self.best_score - self.seed_score


def summarize(evo: Any, elapsed: float) -> RunSummary:
    """The summary of an :class:`~qdevolve.evolve.engine.Evolution` after :meth:`run`."""
    led = evo.ledger
    stats = dict(evo.archive.stats())
    if evo.novelty is not None:
        stats["novelty_rejected"] = evo.novelty.rejected
    log = getattr(getattr(evo, "listener", None), "train_log", None)
    if log and any("targets_solved" in row for row in log):  # train.solved_by: problems solved per version
        stats["targets_solved_per_version"] = [(row["version"], int(row["targets_solved"]))
                                               for row in log if "targets_solved" in row]
    if evo.budget.tokens:
        stats["usage"] = evo.budget.state()
    return RunSummary(run_id=evo.run_id, db=evo.store.target, evaluations=evo.store.count_evaluations(evo.run_id),
                      budget=led.budget, seed_score=led.seed_score, best_score=led.best_score,
                      best_program_id=led.best_id, by_status=dict(led.by_status), elapsed_s=elapsed, stats=stats,
                      stop_reason=led.stop_reason or "budget")
