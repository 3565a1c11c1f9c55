"""The run summary of a joined run reports the trainer: steps, policy versions, advantage
spread, gradient norm, and where to look next (``lineage policy``, the viewer's policy page)."""

from __future__ import annotations

import io

from rich.console import Console

from qdevolve.evolve.report.display import print_summary
from qdevolve.evolve.report.summary import RunSummary, training_summary
from qdevolve.evolve.report.summary_rows import training_rows


def _versions(*steps: dict) -> list[dict]:
    rows = [{"version": 0, "step": 0, "metrics": {}}]
    for i, m in enumerate(steps, start=1):
        rows.append({"version": i, "step": i, "metrics": m})
    return rows


def test_training_summary_ranges_over_steps() -> None:
    t = training_summary(_versions({"advantage_abs_mean": 0.4, "grad_norm": 0.9, "loss": 0.1, "n_completions": 32},
                                   {"advantage_abs_mean": 0.7, "grad_norm": 0.3, "loss": -0.2, "kl": 0.01,
                                    "n_completions": 32}))
    assert t.steps == 2 and t.versions == (0, 1, 2) and t.completions == 64
    assert t.advantage_spread == (0.4, 0.7) and t.grad_norm == (0.3, 0.9)
    assert t.loss == -0.2 and t.kl == 0.01 and t.has_signal
    rows = dict(training_rows(t))
    assert rows["trainer steps"].startswith("2 ") and rows["policy versions"] == "v0 .. v2 (3)"
    assert rows["advantage |A| mean"] == "0.4 .. 0.7" and rows["gradient norm"] == "0.3 .. 0.9"
    assert "training signal" not in rows


def test_zero_signal_is_called_out() -> None:
    t = training_summary(_versions({"advantage_abs_mean": 0.0, "grad_norm": 0.0, "loss": 0.0}))
    assert not t.has_signal
    assert "none" in dict(training_rows(t))["training signal"]
    assert training_summary([]) is None


def test_print_summary_shows_training_and_where_to_look() -> None:
    t = training_summary(_versions({"advantage_abs_mean": 0.5, "grad_norm": 0.2, "loss": 0.1}))
    summary = RunSummary(run_id="abcdef0123456789", db="/tmp/x.sqlite", evaluations=65, budget=64, seed_score=0.2,
                         best_score=1.0, best_program_id="p" * 32, by_status={"ok": 65}, elapsed_s=3.0, training=t)
    out = io.StringIO()
    print_summary(summary, Console(file=out, width=200))
    text = out.getvalue()
    assert "trainer steps" in text and "advantage |A| mean" in text and "gradient norm" in text
    assert "qdevolve lineage policy --db /tmp/x.sqlite" in text
    assert "/runs/abcdef012345/policy" in text
    plain = io.StringIO()
    print_summary(RunSummary(run_id="r" * 16, db="/tmp/y.sqlite", evaluations=2, budget=1, seed_score=1.0,
                             best_score=1.0, best_program_id=None, by_status={}, elapsed_s=1.0), Console(file=plain))
    assert "trainer steps" not in plain.getvalue() and "lineage policy" not in plain.getvalue()
