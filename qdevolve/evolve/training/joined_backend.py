"""The joined loop's shared backend behind a lock (with ES members), and the stored-hash view.

:class:`LockedBackend` keeps trainer steps and generations apart (a step never races a
generation) while generations run side by side, so an in-process backend's coalescer can join
several jobs' requests into one batch; with ES each generation is one population member's
group, alone on the weights it perturbs.
:class:`StoredBefore` answers ``code_hash in stored`` for the programs a run stored before
one program (the shaping's ``duplicate`` kind), looked up in the store, not loaded.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from qdevolve.db.store import LineageStore
from qdevolve.types import Program

__all__ = ["LockedBackend", "SharedLock", "StoredBefore"]


class SharedLock:
    """A readers-writer lock for one event loop: many :meth:`shared` holders at once, or one
    :meth:`exclusive` holder. A waiting exclusive holder stops new shared ones from entering,
    so a trainer step is never starved by a stream of generations."""

    def __init__(self) -> None:
        self._cond: asyncio.Condition | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.readers = 0
        self.writer = False
        self.writers_waiting = 0

    def _condition(self) -> asyncio.Condition:
        loop = asyncio.get_running_loop()
        if self._cond is None or self._loop is not loop:  # a new event loop (a resumed run): start afresh
            self._cond, self._loop = asyncio.Condition(), loop
            self.readers, self.writer, self.writers_waiting = 0, False, 0
        return self._cond

    @asynccontextmanager
    async def shared(self) -> AsyncIterator[None]:
        cond = self._condition()
        async with cond:
            await cond.wait_for(lambda: not self.writer and self.writers_waiting == 0)
            self.readers += 1
        try:
            yield
        finally:
            async with cond:
                self.readers -= 1
                cond.notify_all()

    @asynccontextmanager
    async def exclusive(self) -> AsyncIterator[None]:
        cond = self._condition()
        async with cond:
            self.writers_waiting += 1
            try:
                await cond.wait_for(lambda: not self.writer and self.readers == 0)
            finally:
                self.writers_waiting -= 1
                cond.notify_all()  # a cancelled writer must not keep readers out
            self.writer = True
        try:
            yield
        finally:
            async with cond:
                self.writer = False
                cond.notify_all()


class LockedBackend:
    """The shared backend behind a lock, so a trainer step never races a generation.

    Generations hold the lock shared (they run side by side, and an in-process backend joins
    their requests into one batch); trainer steps take it with :meth:`exclusive`. With ES
    (``es``: a :class:`~qdevolve.rl.es.GroupES`) each generation is one population
    member's group: the weights are perturbed for it under the lock, and the completions carry
    the member in ``es_member`` so their rewards reach that member's fitness. Once
    every member has its group, generations wait for the ES update."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.lock = SharedLock()
        self.es: Any = None
        self.released: asyncio.Event | None = None

    def exclusive(self) -> Any:
        """``async with backend.exclusive():`` no generation runs meanwhile (a trainer step)."""
        return self.lock.exclusive()

    def release(self) -> None:
        """Wake the generations waiting for an ES update."""
        if self.released is not None:
            self.released.set()
        self.released = asyncio.Event()

    async def generate(self, requests: list[Any]) -> list[list[Any]]:
        if self.es is None:
            async with self.lock.shared():
                return await self.inner.generate(requests)
        while self.es.full:
            if self.released is None:
                self.released = asyncio.Event()
            await self.released.wait()
        member = self.es.assign()
        async with self.lock.exclusive():  # one member's perturbation on the weights at a time
            with self.es.perturbed(member):
                out = await self.inner.generate(requests)
        for comps in out:
            for c in comps:
                c.es_member = member
        return out

    def load_policy(self, version: int, path: str | None) -> None:
        self.inner.load_policy(version, path)

    def close(self) -> Any:
        close = getattr(self.inner, "close", None)  # optional in the backend protocol
        return None if close is None else close()


class StoredBefore:
    """``code_hash in stored`` for the programs stored in the run before ``program`` (itself
    excluded: a resumed child may already be stored); looked up in the store, not loaded."""

    def __init__(self, store: LineageStore, run_id: str, program: Program) -> None:
        self.store, self.run_id, self.program_id = store, run_id, program.id

    def __contains__(self, code_hash: object) -> bool:
        found = self.store.find_code_hash(self.run_id, str(code_hash))
        return found is not None and found != self.program_id
