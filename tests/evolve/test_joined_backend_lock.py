"""LockedBackend: generations run side by side (their requests share a batch), trainer steps
run alone, and a waiting trainer step is not starved by a stream of generations."""

from __future__ import annotations

import asyncio
import threading
from contextlib import contextmanager
from typing import Any

from qdevolve.backends.coalesce import RequestCoalescer
from qdevolve.evolve.training.joined_backend import LockedBackend, SharedLock


class CountingBackend:
    """An inner backend that records how many generations run at once."""

    def __init__(self, hold_s: float = 0.05) -> None:
        self.hold_s, self.running, self.most, self.log = hold_s, 0, 0, []

    async def generate(self, requests: list[Any]) -> list[list[Any]]:
        self.running += 1
        self.most = max(self.most, self.running)
        self.log.append(("start", tuple(requests)))
        await asyncio.sleep(self.hold_s)
        self.running -= 1
        self.log.append(("end", tuple(requests)))
        return [[r] for r in requests]


def test_two_jobs_generate_at_once() -> None:
    inner = CountingBackend()
    backend = LockedBackend(inner)

    async def main():
        return await asyncio.gather(backend.generate(["a"]), backend.generate(["b"]))

    assert asyncio.run(main()) == [[["a"]], [["b"]]]
    assert inner.most == 2  # a plain lock would make this 1


def test_two_jobs_requests_share_one_batch_of_the_coalescer() -> None:
    """The point of sharing: an in-process backend's coalescer joins both jobs' requests."""
    seen: list[list[str]] = []
    co = RequestCoalescer(lambda reqs: seen.append(list(reqs)) or [[r.upper()] for r in reqs], gather_s=0.02)

    class Inner:
        async def generate(self, requests: list[Any]) -> list[list[Any]]:
            return await co(requests)

    backend = LockedBackend(Inner())

    async def main():
        return await asyncio.gather(backend.generate(["a", "a2"]), backend.generate(["b"]))

    assert asyncio.run(main()) == [[["A"], ["A2"]], [["B"]]]
    assert seen == [["a", "a2", "b"]] and co.batches == 1


def test_a_trainer_step_waits_for_running_generations_and_blocks_new_ones() -> None:
    inner = CountingBackend(hold_s=0.05)
    backend = LockedBackend(inner)
    events: list[str] = []

    async def step():
        async with backend.exclusive():
            events.append(f"step start, {inner.running} generating")
            await asyncio.sleep(0.05)
            events.append("step end")

    async def late_generation():
        await asyncio.sleep(0.01)  # arrives while the step waits for the first generation
        await backend.generate(["late"])
        events.append("late generated")

    async def main():
        first = asyncio.create_task(backend.generate(["first"]))
        await asyncio.sleep(0.005)
        await asyncio.gather(step(), late_generation(), first)

    asyncio.run(main())
    assert events == ["step start, 0 generating", "step end", "late generated"]


def test_es_generations_stay_one_at_a_time() -> None:
    """With ES each generation perturbs the shared weights for its member: never two at once."""

    class FakeES:
        full = False
        members = iter(range(100))

        def assign(self) -> int:
            return next(self.members)

        @contextmanager
        def perturbed(self, member: int):
            yield

    class Completion:
        def __init__(self, r: Any) -> None:
            self.r = r

    class Inner(CountingBackend):
        async def generate(self, requests):
            out = await super().generate(requests)
            return [[Completion(c) for c in comps] for comps in out]

    inner = Inner()
    backend = LockedBackend(inner)
    backend.es = FakeES()

    async def main():
        return await asyncio.gather(*(backend.generate([x]) for x in "abc"))

    out = asyncio.run(main())
    assert inner.most == 1
    assert sorted(res[0][0].es_member for res in out) == [0, 1, 2]  # one member per generation


def test_a_cancelled_waiting_step_lets_generations_in() -> None:
    lock = SharedLock()

    async def main():
        entered = threading.Event()
        async with lock.shared():
            waiter = asyncio.create_task(_exclusive(lock))
            await asyncio.sleep(0.01)
            assert lock.writers_waiting == 1
            waiter.cancel()
            await asyncio.gather(waiter, return_exceptions=True)
        async with lock.shared():  # not kept out by the cancelled writer
            entered.set()
        return entered.is_set()

    assert asyncio.run(asyncio.wait_for(main(), 2))


async def _exclusive(lock: SharedLock) -> None:
    async with lock.exclusive():
        pass
