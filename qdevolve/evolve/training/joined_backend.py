"""The joined loop's shared backend behind a lock (with ES members), and the stored-hash view.

:class:`LockedBackend` serialises generations and trainer steps (a step never races a
generation); with ES each generation is one population member's group.
:class:`StoredBefore` answers ``code_hash in stored`` for the programs a run stored before
one program (the shaping's ``duplicate`` kind), looked up in the store, not loaded.
"""

from __future__ import annotations

import asyncio
from typing import Any

from qdevolve.db.store import LineageStore
from qdevolve.types import Program

__all__ = ["LockedBackend", "StoredBefore"]


class LockedBackend:
    """The shared backend behind a lock, so a trainer step never races a generation.

    With ES (``es``: a :class:`~qdevolve.rl.es.GroupES`) each generation is one population
    member's group: the weights are perturbed for it under the lock, and the completions carry
    the member in ``es_member`` so their rewards reach that member's fitness. Once
    every member has its group, generations wait for the ES update."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.lock: asyncio.Lock | None = None  # created inside the running event loop
        self.es: Any = None
        self.released: asyncio.Event | None = None

    def _lock(self) -> asyncio.Lock:
        if self.lock is None:
            self.lock = asyncio.Lock()
        return self.lock

    def release(self) -> None:
        """Wake the generations waiting for an ES update."""
        if self.released is not None:
            self.released.set()
        self.released = asyncio.Event()

    async def generate(self, requests: list[Any]) -> list[list[Any]]:
        if self.es is None:
            async with self._lock():
                return await self.inner.generate(requests)
        while self.es.full:
            if self.released is None:
                self.released = asyncio.Event()
            await self.released.wait()
        member = self.es.assign()
        async with self._lock():
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
