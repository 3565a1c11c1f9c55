"""The engine's loop: keep ``max_pending`` jobs in flight until the ledger says stop.

A job is one child plan: ask (reserve budget), breed (the operator's model call), evaluate
each child on the executor and tell it, then the listener's ``after_job``. The loop only
manages concurrency; every decision lives in the engine, the breeder and the ledger.

Stopping: the budget is planned, a token/cost/wall budget is spent, a stop reason is set (duplicate streak), the wall time
passes (jobs in flight are cancelled: nothing of an untold child is stored), or a job
raises. On a raise no new job starts, the jobs in flight finish (their children are told),
and the first error is re-raised to :meth:`Evolution.run`, which marks the run stopped.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

__all__ = ["drive"]


async def _job(engine: Any, plan: Any) -> None:
    children = await engine.breed(plan)
    await asyncio.gather(*(engine.evaluate(c) for c in children))
    engine.tell_duplicates(plan)  # after the siblings they may copy are stored
    await engine.after_job(children)


async def drive(engine: Any, *, max_pending: int, wall_time_s: float | None) -> None:
    """Run jobs until the budget, a stop reason, the wall time or an error (module docstring)."""
    ledger = engine.ledger
    deadline = None if not wall_time_s else time.monotonic() + float(wall_time_s)
    if engine.unevaluated:  # stored without an evaluation by a schema-v1 run
        from qdevolve.evolve.breeder import Child
        from qdevolve.mutation.base import Candidate

        await asyncio.gather(*(engine.evaluate(Child(p, Candidate(p.code, p.operator, p.parent_ids)))
                               for p in engine.unevaluated))
        engine.unevaluated = []
    pending: set[asyncio.Task[None]] = set()
    iteration = ledger.reserved
    error: BaseException | None = None
    while error is None and not ledger.stopping:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            ledger.stop("wall time")
            for task in pending:
                task.cancel()
            break
        spent = engine.budget.exceeded()  # token / cost / wall-time budget of the config
        if spent:
            ledger.stop(spent)
            break
        if pending and (len(pending) >= max_pending or ledger.remaining == 0):
            done, pending = await asyncio.wait(pending, timeout=left, return_when=asyncio.FIRST_COMPLETED)
            errors = [t.exception() for t in done if not t.cancelled()]  # retrieves every one
            error = next((e for e in errors if e is not None), None)
            continue
        if ledger.remaining == 0:
            ledger.stop("budget")
            break
        plan = engine.ask(iteration)
        iteration += 1
        pending.add(asyncio.create_task(_job(engine, plan)))
    results = await asyncio.gather(*pending, return_exceptions=True)
    error = error or next((r for r in results if isinstance(r, BaseException)
                           and not isinstance(r, asyncio.CancelledError)), None)
    if error is not None:
        raise error
