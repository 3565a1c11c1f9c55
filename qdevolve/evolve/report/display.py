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
from qdevolve.evolve.setup.budget import spender_line
from qdevolve.textsafe import terminal_safe_line

__all__ = ["ProgressDisplay", "print_summary", "relative_gain"]


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
    if not console.is_terminal:  # a pipe or a file: whole lines, never a bar cut to the width
        with _plain_progress(ledger, console, stats) as refresh:
            yield refresh
        return
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


def _progress_text(ledger: RunLedger, stats: Callable[[], dict[str, Any]] | None, now: float) -> str:
    """``evolving 1136/2000 (56.8%) 3.6 ev/s best 1.734 cov 40.6% | fail error:42 0:05:12``."""
    best = f"{ledger.best_score:.4g}" if ledger.best_score is not None else "-"
    fails = " ".join(f"{k}:{v}" for k, v in sorted(ledger.by_status.items()) if k != "ok")
    cov = (stats() if stats is not None else {}).get("coverage")
    cov_s = f" cov {100 * cov:.1f}%" if isinstance(cov, (int, float)) else ""
    pct = f" ({100 * ledger.evaluated / ledger.budget:.1f}%)" if ledger.budget else ""
    elapsed = int(now - ledger.started_at) if ledger.started_at else 0
    clock = f"{elapsed // 3600}:{elapsed // 60 % 60:02d}:{elapsed % 60:02d}"
    return (f"evolving {ledger.evaluated}/{ledger.budget}{pct} {ledger.rate(now):.1f} ev/s best {best}{cov_s}"
            + (f" | fail {fails}" if fails else "") + f" {clock}")


@contextlib.contextmanager
def _plain_progress(ledger: RunLedger, console: Console, stats: Callable[[], dict[str, Any]] | None,
                    every_s: float = 30.0, steps: int = 10) -> Iterator[Callable[[], None]]:
    """Progress for a console that is not a terminal: one whole line (never wrapped or cut)
    at each tenth of the budget or every ``every_s`` seconds, whichever comes first, and one
    at the end."""
    state = {"at": time.time(), "step": 0, "shown": -1}

    def line(now: float) -> None:
        state["at"], state["shown"] = now, ledger.evaluated
        console.print(Text(_progress_text(ledger, stats, now)), soft_wrap=True, highlight=False)

    def refresh() -> None:
        now = time.time()
        step = steps * ledger.evaluated // ledger.budget if ledger.budget else 0
        if step > state["step"] or now - state["at"] >= every_s:
            state["step"] = max(step, state["step"])
            if ledger.evaluated != state["shown"] and ledger.evaluated < ledger.budget:
                line(now)

    try:
        yield refresh
    finally:
        line(time.time())


def relative_gain(seed: float | None, gain: float) -> str:
    """`` (+12.50%)``: the gain as a percentage of the seed score, or ``""`` when the seed
    score is near 0 next to the gain (``|gain| > 10 |seed|``): a percentage of a near-zero
    baseline (+2210 % for a seed of 0.014) says nothing the absolute gain does not."""
    if not seed or abs(gain) > 10 * abs(seed):
        return ""
    return f" ({100 * gain / abs(seed):+.2f}%)"


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
        t.add_row("gain over seed", f"{gain:+.6g}{relative_gain(summary.seed_score, gain)}")
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
    spent_by = spender_line(summary.stats.get("usage"))
    if spent_by:  # the budget line: who spent the run's tokens (engine, agents, judge)
        t.add_row("tokens spent by", Text(terminal_safe_line(spent_by)))
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
    from qdevolve.evolve.report.front import front_tables

    for front in front_tables(summary.stats):  # a pareto archive's front (per island)
        console.print(front)
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
