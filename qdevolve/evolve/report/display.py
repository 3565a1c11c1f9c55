"""Rich progress display (it reads the run ledger only) and the end-of-run summary table."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from qdevolve.db._open import display_target
from qdevolve.evolve.report.ledger import RunLedger
from qdevolve.textsafe import terminal_safe_line

__all__ = ["ProgressDisplay", "print_summary"]


@contextlib.contextmanager
def ProgressDisplay(ledger: RunLedger, *, enabled: bool = True, console: Console | None = None,
                    stats: Callable[[], dict[str, Any]] | None = None) -> Iterator[Callable[[], None]]:
    """Context manager yielding a callback that refreshes the bar after each evaluation.

    It reads the run's :class:`~qdevolve.evolve.report.ledger.RunLedger` (and the archive's
    ``stats()`` for coverage) and nothing else of the engine.
    """
    if not enabled:
        yield lambda: None
        return
    console = console or Console(stderr=True)
    progress = Progress(
        TextColumn("[bold]evolving"), BarColumn(), MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"), TextColumn("{task.fields[info]}"), TimeElapsedColumn(),
        console=console, transient=False, refresh_per_second=4)
    task = progress.add_task("evolve", total=ledger.budget, completed=ledger.evaluated, rate="", info="")
    last = [0.0]

    def refresh() -> None:
        now = time.time()
        if now - last[0] < 0.2 and ledger.evaluated < ledger.budget:
            return
        last[0] = now
        best = f"{ledger.best_score:.4g}" if ledger.best_score is not None else "-"
        fails = " ".join(f"{k}:{v}" for k, v in sorted(ledger.by_status.items()) if k != "ok")
        cov = (stats() if stats is not None else {}).get("coverage")
        cov_s = f" cov {100 * cov:.1f}%" if isinstance(cov, (int, float)) else ""
        progress.update(task, completed=ledger.evaluated, rate=f"{ledger.rate(now):.1f} ev/s",
                        info=f"best {best}{cov_s}" + (f" | fail {fails}" if fails else ""))

    with progress:
        yield refresh
        refresh()


def print_summary(summary: Any, console: Console | None = None) -> None:
    """The end-of-run table: where the database is and how to inspect it."""
    console = console or Console()
    t = Table(title="qdevolve run summary", show_header=False)
    t.add_column("what", style="bold", no_wrap=True)
    t.add_column("value", overflow="fold")  # a long path or model name wraps whole, never cut with '…'

    t.add_row("database", terminal_safe_line(display_target(str(summary.db))))
    t.add_row("run", summary.run_id)
    t.add_row("evaluations", f"{summary.evaluations} (budget {summary.budget} children + seed)")
    t.add_row("stopped by", terminal_safe_line(summary.stop_reason))
    t.add_row("seed score", "-" if summary.seed_score is None else f"{summary.seed_score:.6g}")
    t.add_row("best score", "-" if summary.best_score is None else f"{summary.best_score:.6g}")
    gain = summary.gain
    if gain is not None:
        rel = f" ({100 * gain / abs(summary.seed_score):+.2f}%)" if summary.seed_score else ""
        t.add_row("gain over seed", f"{gain:+.6g}{rel}")
    if getattr(summary, "record", None):
        t.add_row("best known", terminal_safe_line(summary.record))
    t.add_row("best program", summary.best_program_id or "-")
    for what, value in getattr(summary, "extra_rows", ()):  # the executor's rows (agents: held-out verdict)
        t.add_row(terminal_safe_line(what), terminal_safe_line(value))
    for key in ("coverage", "qd_score", "size", "novelty_rejected"):
        if key in summary.stats and summary.stats[key] is not None:
            v = summary.stats[key]
            t.add_row(key, f"{v:.4g}" if isinstance(v, float) else str(v))
    for model, u in (summary.stats.get("usage") or {}).get("models", {}).items():  # budget meter totals
        t.add_row("model", Text(f"{terminal_safe_line(model)}: {u['calls']} calls, "
                                f"{u['prompt_tokens']}+{u['completion_tokens']} tokens, cost {u['cost']:.4g}"))
    for what, value in getattr(summary, "model_rows", ()):  # parse rate, tokens/s
        t.add_row(what, value)
    solved = summary.stats.get("targets_solved_per_version")
    if solved:  # train.solved_by: a problem suite's targets solved per policy version
        t.add_row("targets solved per policy version", " ".join(f"v{v}:{n}" for v, n in solved))
    t.add_row("by status", " ".join(f"{k}:{v}" for k, v in sorted(summary.by_status.items())))
    t.add_row("elapsed", f"{summary.elapsed_s:.1f} s")
    training = getattr(summary, "training", None)
    if training is not None:
        from qdevolve.evolve.report.summary_rows import training_rows

        for what, value in training_rows(training):
            t.add_row(what, value)
    console.print(t)
    db = terminal_safe_line(display_target(str(summary.db)))  # a URL's password masked
    hints = [f"qdevolve lineage tree --db {db}"]
    if summary.best_program_id:
        hints.append(f"qdevolve lineage show {summary.best_program_id[:12]} --db {db}")
    hints += [f"qdevolve archive stats --db {db}", f"qdevolve archive plot --db {db} --out archive.png"]
    if training is not None:
        hints += [f"qdevolve lineage policy --db {db}   # each trainer step",
                  f"qdevolve serve --db {db}   # page /runs/{summary.run_id[:12]}/policy"]
    hints.append(f"qdevolve resume --db {db} --iterations N   # continue")
    console.print("Inspect it:")
    for hint in hints:  # one line each, never wrapped or coloured, so it pastes as a command
        console.print(Text("  " + hint), soft_wrap=True, highlight=False)
