"""The summary table's rows about training (a joined run's trainer steps)."""

from __future__ import annotations

from qdevolve.evolve.report.summary import TrainingSummary

__all__ = ["training_rows"]


def _range(span: tuple[float, float] | None) -> str:
    if span is None:
        return "-"
    lo, hi = span
    return f"{lo:.3g}" if lo == hi else f"{lo:.3g} .. {hi:.3g}"


def training_rows(t: TrainingSummary) -> list[tuple[str, str]]:
    """``(what, value)`` rows: steps, versions, advantage spread, gradient norm, last loss/KL."""
    versions = (f"v{t.versions[0]}" if len(t.versions) == 1 else f"v{t.versions[0]} .. v{t.versions[-1]}"
                f" ({len(t.versions)})")
    rows = [("trainer steps", f"{t.steps} ({t.completions} completions trained on)"),
            ("policy versions", versions)]
    if t.steps:
        rows += [("advantage |A| mean", _range(t.advantage_spread)),
                 ("gradient norm", _range(t.grad_norm))]
        last = ", ".join(f"{k} {v:.3g}" for k, v in (("loss", t.loss), ("KL", t.kl), ("reward mean", t.reward_mean))
                         if isinstance(v, (int, float)))
        if last:
            rows.append(("last step", last))
        if not t.has_signal:
            rows.append(("training signal", "none: every group's rewards were equal (zero advantages); "
                                            "see docs/joined.md"))
    return rows
