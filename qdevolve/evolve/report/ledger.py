"""The run ledger: every counter of a run and why it stopped, in one dataclass.

The engine creates it in ``__init__`` and rebuilds it from the store with
:meth:`RunLedger.from_store`; :meth:`Evolution.tell` updates it after each write; the
progress display and the run summary read nothing else. Budget terms:

* ``budget``: children the run may store (``iterations``);
* ``reserved``: children planned so far (stored + in flight); the loop plans while
  ``reserved < budget`` so it never overshoots;
* ``stored``: children in the database (each is stored together with its evaluation, so
  ``stored == evaluated`` except for programs a pre-v2 run left unevaluated);
* ``evaluated``: children with an evaluation (the seed is counted apart).
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from dataclasses import dataclass, field

from qdevolve.db.store import LineageStore
from qdevolve.types import EvalResult, Program

__all__ = ["RunLedger"]


_DIGITS = re.compile(r"\d+")


@dataclass
class RunLedger:
    """Budget, best, counts by status, duplicate streak and stop reason of one run."""

    budget: int
    reserved: int = 0            # children planned: stored + in flight
    stored: int = 0              # children stored
    evaluated: int = 0           # children evaluated
    seed_score: float | None = None
    best_score: float | None = None
    best_id: str | None = None
    by_status: Counter[str] = field(default_factory=Counter)  # latest status of every program, seed included
    dup_streak: int = 0          # consecutive duplicate (or non-novel) children
    stop_reason: str | None = None  # set once: budget, wall time, duplicates, an abort message
    evaluated_at_start: int = 0  # for the display's rate
    started_at: float = field(default_factory=time.time)
    # The first children's failure reasons (fail fast): grouping key (digits masked) -> the
    # first message seen under it, as it was written.
    early_reasons: dict[str, str] | None = field(default_factory=dict)

    @classmethod
    def from_store(cls, store: LineageStore, run_id: str, budget: int) -> RunLedger:
        """The ledger of a stored run (one pass of aggregate queries; nothing is replayed)."""
        c = store.run_counts(run_id)
        led = cls(budget=budget, stored=c.children, reserved=c.children, evaluated=c.children_evaluated,
                  seed_score=c.seed_score, best_score=c.best_score, best_id=c.best_id,
                  by_status=Counter(c.by_status))
        led.evaluated_at_start = led.evaluated
        if led.evaluated:  # the early children's reasons are not replayed: no fail-fast on resume
            led.early_reasons = None
        return led

    @property
    def remaining(self) -> int:
        """Children that may still be planned."""
        return max(0, self.budget - self.reserved)

    @property
    def stopping(self) -> bool:
        return self.stop_reason is not None

    def stop(self, reason: str) -> None:
        """Record why the run stops (the first reason wins)."""
        if self.stop_reason is None:
            self.stop_reason = reason

    def note(self, program: Program, result: EvalResult, *, new_program: bool) -> None:
        """Count one told evaluation (``new_program``: the program was stored with it)."""
        self.by_status[result.status] += 1
        if program.operator == "seed":  # several seeds: the best one
            if self.seed_score is None or (result.score is not None and result.score > self.seed_score):
                self.seed_score = result.score
        else:
            self.evaluated += 1
            self.stored += int(new_program)
        score = result.score
        if result.status == "ok" and score is not None and math.isfinite(score):
            if self.best_score is None or score > self.best_score:
                self.best_score, self.best_id = score, program.id

    def early_failure(self, result: EvalResult, limit: int) -> str | None:
        """The first failure message when each of the run's first ``limit`` children failed alike.

        Called for every told child; only the first ``limit`` children of the run count (a
        resumed run that already has them never stops here). Reasons are grouped on their
        first line with digits masked, so 'port 8000' and 'port 8001' are one reason; the
        message returned is the first one of the group as it was written.
        """
        if limit <= 0 or self.evaluated > limit:
            return None
        if result.ok:
            self.early_reasons = None
            return None
        if self.early_reasons is None:
            return None
        lines = (result.error or result.status).strip().splitlines()
        message = (lines[0] if lines else result.status)[:200]
        self.early_reasons.setdefault(_DIGITS.sub("N", message), message)
        if self.evaluated == limit and len(self.early_reasons) == 1:
            return next(iter(self.early_reasons.values()))
        return None

    def duplicate(self, limit: int, what: str = "duplicate") -> None:
        """One more duplicate child; stop at ``limit`` in a row."""
        self.dup_streak += 1
        if self.dup_streak >= limit:
            self.stop(f"{self.dup_streak} {what} children in a row")

    def rate(self, now: float | None = None) -> float:
        """Evaluations per second since this process started."""
        return (self.evaluated - self.evaluated_at_start) / max((now or time.time()) - self.started_at, 1e-9)
