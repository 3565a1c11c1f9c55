"""RequestCoalescer: concurrent calls joined into one blocking call, results split back."""

from __future__ import annotations

import asyncio
import threading

import pytest

from qdevolve.backends.coalesce import RequestCoalescer


def test_calls_arriving_while_a_batch_runs_join_the_next_one() -> None:
    seen: list[list[str]] = []
    first_running, release = threading.Event(), threading.Event()

    def run(reqs: list[str]) -> list[list[str]]:
        seen.append(list(reqs))
        if len(seen) == 1:
            first_running.set()
            release.wait(5)
        return [[r.upper()] for r in reqs]

    co = RequestCoalescer(run, gather_s=0.0)

    async def main():
        a = asyncio.create_task(co(["a"]))
        while not first_running.is_set():
            await asyncio.sleep(0.001)
        later = [asyncio.create_task(co([x, x + "2"])) for x in ("b", "c")]
        await asyncio.sleep(0.01)
        release.set()
        return await a, [await t for t in later]

    first, later = asyncio.run(main())
    assert first == [["A"]] and later == [[["B"], ["B2"]], [["C"], ["C2"]]]
    assert seen == [["a"], ["b", "b2", "c", "c2"]] and co.batches == 2


def test_an_error_reaches_only_the_call_that_caused_it() -> None:
    def run(reqs: list[str]) -> list[list[str]]:
        if "bad" in reqs:
            raise ValueError("bad request")
        return [[r] for r in reqs]

    co = RequestCoalescer(run)

    async def main():
        return await asyncio.gather(co(["ok"]), co(["bad"]), co(["fine"]), return_exceptions=True)

    ok, bad, fine = asyncio.run(main())
    assert ok == [["ok"]] and fine == [["fine"]]
    assert isinstance(bad, ValueError) and str(bad) == "bad request"


def test_a_cancelled_caller_is_dropped_and_the_rest_are_served() -> None:
    calls: list[list[str]] = []
    co = RequestCoalescer(lambda reqs: calls.append(list(reqs)) or [[r] for r in reqs], gather_s=0.05)

    async def main():
        gone = asyncio.create_task(co(["gone"]))
        kept = asyncio.create_task(co(["kept"]))
        await asyncio.sleep(0)
        gone.cancel()
        with pytest.raises(asyncio.CancelledError):
            await gone
        return await kept

    assert asyncio.run(main()) == [["kept"]] and calls == [["kept"]]
