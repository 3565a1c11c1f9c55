"""Progress of one long phase outside the evolution loop (base pre-training, model loading, training).

On a terminal a phase is a rich progress bar, drawn as soon as the phase starts; anywhere
else (a log file, a pipe, CI) it is a line when it starts (``label ...``) and one when it
ends (``label: done in N s`` or ``failed after N s``), never a redraw per step, so a log
shows what the process is doing while it does it and lines printed meanwhile stay whole.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from typing import IO, Any

__all__ = ["phase"]


@contextlib.contextmanager
def phase(label: str, total: int | None = None, *, console: Any = None,
          stream: IO[str] | None = None) -> Iterator[Callable[[int], None]]:
    """Show ``label`` while the ``with`` body runs; yields ``advance(done)`` (steps done so far).

    Args:
        label: What the phase does, e.g. ``pre-training the tiny base policy (600 steps)``.
        total: Steps in the phase (``None``: a spinner and elapsed time, no bar).
        console: The rich console to draw on (default: a new one on stderr).
        stream: Where the one-line form goes when the console is no terminal (default: stderr).
    """
    from rich.console import Console

    from qdevolve.textsafe import terminal_safe_line

    label = terminal_safe_line(label)  # it may carry a path from a config: no control characters
    console = console if console is not None else Console(stderr=True)
    start = time.perf_counter()
    if console.is_terminal:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        columns = [SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), TimeRemainingColumn()] if total else \
            [SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn()]
        with Progress(*columns, console=console, transient=False, refresh_per_second=5) as progress:
            task = progress.add_task(label.replace("[", "\\["), total=total)  # text, never rich markup
            yield lambda done: progress.update(task, completed=done)
        return
    out = stream if stream is not None else sys.stderr
    out.write(f"{label} ...\n")
    out.flush()
    try:
        yield lambda done: None
    except BaseException:
        out.write(f"{label}: failed after {time.perf_counter() - start:.1f} s\n")
        out.flush()
        raise
    out.write(f"{label}: done in {time.perf_counter() - start:.1f} s\n")
    out.flush()
