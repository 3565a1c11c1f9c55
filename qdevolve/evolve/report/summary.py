"""What a finished (or stopped) run reports, read from its ledger and archive."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["RunSummary", "TrainingSummary", "summarize", "training_summary"]


@dataclass
class TrainingSummary:
    """What the policy trainer of a joined run did (from the run's stored policy versions).

    ``steps`` counts trainer updates (versions after the initial one); the ranges are
    ``(min, max)`` over those steps: ``advantage_spread`` is the mean |advantage| of a step
    (0 when every completion of every group got the same reward: nothing to learn from),
    ``grad_norm`` the gradient norm before clipping.
    """

    steps: int
    versions: tuple[int, ...]
    advantage_spread: tuple[float, float] | None = None
    grad_norm: tuple[float, float] | None = None
    loss: float | None = None
    kl: float | None = None
    reward_mean: float | None = None
    completions: int = 0

    @property
    def has_signal(self) -> bool:
        """Whether some step had non-zero advantages and a non-zero gradient."""
        return bool(self.advantage_spread and self.advantage_spread[1] > 0
                    and self.grad_norm and self.grad_norm[1] > 0)


def _span(values: list[float]) -> tuple[float, float] | None:
    return (min(values), max(values)) if values else None


def training_summary(versions: list[dict[str, Any]]) -> TrainingSummary | None:
    """The trainer's report from ``store.policy_versions(run_id)`` rows; ``None`` without a policy."""
    if not versions:
        return None
    steps = [v for v in versions if int(v.get("step") or 0) > 0 or (v.get("metrics") or {}).get("loss") is not None]

    def values(key: str) -> list[float]:
        out = []
        for v in steps:
            x = (v.get("metrics") or {}).get(key)
            if isinstance(x, (int, float)):
                out.append(float(x))
        return out

    last = (steps[-1].get("metrics") or {}) if steps else {}
    return TrainingSummary(
        steps=len(steps), versions=tuple(int(v["version"]) for v in versions),
        advantage_spread=_span(values("advantage_abs_mean")), grad_norm=_span(values("grad_norm")),
        loss=last.get("loss"), kl=last.get("kl"), reward_mean=last.get("reward_mean"),
        completions=int(sum(values("n_completions"))))


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
    training: TrainingSummary | None = None
    record: str | None = None  # "best X, record Y (source), gap Z" when config.yaml names a record
    extra_rows: list[tuple[str, str]] = field(default_factory=list)  # the executor's own rows (agents)
    model_rows: list[tuple[str, str]] = field(default_factory=list)  # parse rate, tokens/s (model runs)

    @property
    def gain(self) -> float | None:
        if self.best_score is None or self.seed_score is None:
            return None
        return self.best_score - self.seed_score


def summarize(evo: Any, elapsed: float) -> RunSummary:
    """The summary of an :class:`~qdevolve.evolve.core.engine.Evolution` after :meth:`run`."""
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
    training = None
    if getattr(evo, "listener", None) is not None:
        training = training_summary(evo.store.policy_versions(evo.run_id))
    rows_of = getattr(getattr(evo, "executor", None), "summary_rows", None)  # optional in the executor protocol
    extra = list(rows_of(evo.store, evo.run_id)) if callable(rows_of) else []
    from qdevolve.evolve.report.summary_rows import model_rows

    replies = model_rows(((p, r) for _, p, r in evo.store.iter_programs(evo.run_id)), elapsed) \
        if getattr(evo.config, "backend", None) else []
    return RunSummary(run_id=evo.run_id, db=evo.store.target, evaluations=evo.store.count_evaluations(evo.run_id),
                      budget=led.budget, seed_score=led.seed_score, best_score=led.best_score,
                      best_program_id=led.best_id, by_status=dict(led.by_status), elapsed_s=elapsed, stats=stats,
                      stop_reason=led.stop_reason or "budget", training=training, record=_record(evo, led),
                      extra_rows=extra, model_rows=replies)


def _record(evo: Any, led: Any) -> str | None:
    """The gap to the config's ``record`` (the best program's ``record.metric``, else its score)."""
    record = getattr(evo.config, "record", None)
    if not record:
        return None
    from qdevolve.evolve.setup import record_line

    best = led.best_score
    if record.get("metric") and led.best_id:
        result = evo.store.get_evaluation(led.best_id)
        best = (result.metrics or {}).get(record["metric"]) if result is not None else None
    return record_line(record, best)
