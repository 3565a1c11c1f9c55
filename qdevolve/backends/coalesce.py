"""Concurrent ``generate`` calls joined into one batched call of an in-process model.

Every LLM operator sends its own request (``backend.generate([req])``) and the engine keeps
``max_pending`` of them in flight. An in-process backend (``transformers``, ``vllm``) that ran
each call on its own would sample at batch size 1, one call after another, however many
plans wait: on 2 CPU cores SmolLM2-135M gave 10.9 tokens/s over a run that way, against about
100 at batch 8 (BENCHMARKS.md, "Sampling a real model").

:class:`RequestCoalescer` queues the calls that arrive while a batch runs (and those that
arrive within ``gather_s`` of the first) and hands them to the backend's blocking
``generate_sync`` as one list, in a worker thread, so they share its batches. Each caller gets
back exactly its own requests' completions, in order. When a joined call raises, each call in
it is run again on its own, so an error reaches only the call that caused it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

__all__ = ["RequestCoalescer", "settle"]


class RequestCoalescer:
    """Join concurrent calls of ``run_batch`` (a blocking ``generate_sync``) into one call.

    Args:
        run_batch: ``requests -> completions per request`` (blocking; run in a worker thread).
        gather_s: Seconds the first call of an idle coalescer waits for others to join it.
    """

    def __init__(self, run_batch: Callable[[list[Any]], list[list[Any]]], gather_s: float = 0.01) -> None:
        self.run_batch, self.gather_s = run_batch, float(gather_s)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: list[tuple[list[Any], asyncio.Future]] = []
        self._worker: asyncio.Task | None = None
        self.batches = 0  # joined calls made (for tests and diagnostics)

    async def __call__(self, requests: list[Any]) -> list[list[Any]]:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a new event loop (a new asyncio.run): start afresh
            self._loop, self._pending, self._worker = loop, [], None
        future: asyncio.Future = loop.create_future()
        self._pending.append((list(requests), future))
        if self._worker is None or self._worker.done():
            self._worker = loop.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        await asyncio.sleep(self.gather_s)
        while self._pending:
            jobs, self._pending = self._pending, []
            jobs = [(reqs, fut) for reqs, fut in jobs if not fut.done()]  # a cancelled caller's are dropped
            if not jobs:
                continue
            flat = [r for reqs, _ in jobs for r in reqs]
            self.batches += 1
            try:
                results = await asyncio.to_thread(self.run_batch, flat)
            except Exception as exc:
                if len(jobs) == 1:
                    settle(jobs[0][1], error=exc)
                else:  # find whose requests raised: each call alone
                    for reqs, fut in jobs:
                        try:
                            settle(fut, value=await asyncio.to_thread(self.run_batch, reqs))
                        except Exception as one:
                            settle(fut, error=one)
                continue
            k = 0
            for reqs, fut in jobs:
                settle(fut, value=results[k:k + len(reqs)])
                k += len(reqs)


def settle(future: asyncio.Future, value: Any = None, error: BaseException | None = None) -> None:
    """Give ``future`` its result or exception, unless it is already done (a cancelled waiter)."""
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)
