"""The engine's loop: keep ``max_pending`` model requests in flight until the ledger says stop.

A job is one child plan: ask (reserve budget), breed (the operator's model call), evaluate
each child on the executor and tell it, then the listener's ``after_job``. The loop only
manages concurrency; every decision lives in the engine, the breeder and the ledger.

Generation slots and evaluation slots are separate: at most ``max_pending`` jobs are
*breeding* (waiting for the model) at once, and a job that has bred gives its generation
slot back while its children wait for and run their evaluations, so the model always has
``max_pending`` requests in flight while the workers evaluate. Up to ``backlog`` bred jobs
may wait for evaluation beyond that (:func:`eval_backlog`: ``2 x`` the executor's slots or
``max_pending``, whichever is larger, with a model backend; ``0`` without one, while training (the rollouts stay on-policy) or with
``run.max_pending: 1``, where one plan is in flight in all, so that a run with a fixed seed
makes the same choices whether or not it was killed and resumed).
When the backlog is full no new request starts until an evaluation finishes (backpressure).

Stopping: the budget is planned, a token/cost/wall budget is spent, a stop reason is set (duplicate streak), the wall time
(``run.wall_time_s`` or ``budget.max_wall_time``, whichever ends first) passes (jobs in flight
are cancelled: nothing of an untold child is stored; the loop never waits past it, and reply
parsing runs off the loop, so a slow job cannot hold the run past its wall time), or a job
raises. On a raise no new job starts, the jobs in flight finish (their children are told),
and the first error is re-raised to :meth:`Evolution.run`, which marks the run stopped.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

__all__ = ["drive", "eval_backlog"]


def eval_backlog(engine: Any, max_pending: int | None = None) -> int:
    """Bred jobs that may wait for evaluation past the ``max_pending`` generation slots.

    ``max(2 x slots, max_pending)``: at least one full set of replies, so that replies which
    arrive together (every request of a burst answered at once) can all wait for a worker while
    the next ``max_pending`` requests go out. With ``2 x slots`` alone each burst held back the
    next requests by its own evaluation time (the LLM-loop benchmark measured 6.9-7.6 of 8
    requests in flight at 1 s model latency).
    """
    if getattr(engine, "backend", None) is None or getattr(engine, "listener", None) is not None:
        return 0
    configured = getattr(getattr(engine, "config", None), "max_pending", None)
    if configured == 1:  # one plan in flight in all
        return 0
    burst = max_pending if max_pending is not None else configured
    return max(2 * max(1, int(getattr(engine.executor, "slots", 1) or 1)), int(burst or 0))


async def _job(engine: Any, plan: Any, bred: Callable[[], None]) -> None:
    try:
        children = await engine.breed(plan)
    finally:
        bred()  # the generation slot is free: the next request may start while these evaluate
    await asyncio.gather(*(engine.evaluate(c) for c in children))
    engine.tell_duplicates(plan)  # after the siblings they may copy are stored
    await engine.after_job(children)


async def drive(engine: Any, *, max_pending: int, wall_time_s: float | None, backlog: int | None = None) -> None:
    """Run jobs until the budget, a stop reason, the wall time or an error (module docstring)."""
    ledger = engine.ledger
    backlog = eval_backlog(engine, max_pending) if backlog is None else max(0, int(backlog))
    deadlines = [time.monotonic() + float(wall_time_s)] if wall_time_s else []
    budget_wall = getattr(engine.budget, "max_wall_time", None)
    if budget_wall:  # --max-wall-time: measured from the meter's start of this invocation
        deadlines.append(float(engine.budget.started) + float(budget_wall))
    deadline = min(deadlines) if deadlines else None
    if engine.unevaluated:  # stored without an evaluation by a schema-v1 run
        from qdevolve.evolve.core.breeder import Child
        from qdevolve.mutation.base import Candidate

        await asyncio.gather(*(engine.evaluate(Child(p, Candidate(p.code, p.operator, p.parent_ids)))
                               for p in engine.unevaluated))
        engine.unevaluated = []
    pending: set[asyncio.Task[None]] = set()
    breeding = 0
    wake = asyncio.Event()  # set when a job has bred (its generation slot is free)

    def bred() -> None:
        nonlocal breeding
        breeding -= 1
        wake.set()

    iteration = ledger.reserved
    error: BaseException | None = None
    while error is None and not ledger.stopping:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            ledger.stop(engine.budget.exceeded() or "wall time")
            for task in pending:
                task.cancel()
            break
        spent = engine.budget.exceeded()  # token / cost / wall-time budget of the config
        if spent:
            ledger.stop(spent)
            break
        if pending and (breeding >= max_pending or len(pending) >= max_pending + backlog or ledger.remaining == 0):
            waiter = None
            if backlog and breeding >= max_pending and len(pending) < max_pending + backlog \
                    and ledger.remaining > 0:
                waiter = asyncio.ensure_future(wake.wait())  # a generation slot frees before a job ends
            done, _ = await asyncio.wait(pending if waiter is None else pending | {waiter}, timeout=left,
                                         return_when=asyncio.FIRST_COMPLETED)
            if waiter is not None:
                waiter.cancel()
                done.discard(waiter)
                wake.clear()
            pending -= done
            errors = [t.exception() for t in done if not t.cancelled()]  # retrieves every one
            error = next((e for e in errors if e is not None), None)
            continue
        if ledger.remaining == 0:
            ledger.stop("budget")
            break
        plan = engine.ask(iteration)
        iteration += 1
        breeding += 1
        pending.add(asyncio.create_task(_job(engine, plan, bred)))
    results = await asyncio.gather(*pending, return_exceptions=True)
    error = error or next((r for r in results if isinstance(r, BaseException)
                           and not isinstance(r, asyncio.CancelledError)), None)
    if error is not None:
        raise error
