"""One writer per run: a lease row in ``run_leases`` kept alive by a heartbeat thread.

``acquire`` takes the run's row in one write transaction. It refuses (:class:`RunLocked`,
exit 2) while another owner's heartbeat is fresh, and takes the row over when the holder is
gone: its heartbeat is older than ``stale_s``, or it ran on this host and its process no
longer exists (a SIGKILLed run is taken over at once, without waiting out the timeout).
While held, a daemon thread refreshes ``heartbeat_at`` every ``heartbeat_s``; ``release``
stops it and deletes the row.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from sqlalchemy import Connection, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from qdevolve.db import schema as S
from qdevolve.errors import QdevolveError
from qdevolve.types import new_id

__all__ = ["RunLease", "RunLocked", "HEARTBEAT_S", "STALE_S"]

HEARTBEAT_S = 2.0
STALE_S = 30.0


class RunLocked(QdevolveError):
    """Another live process is writing this run (exit 2)."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class RunLease:
    """The lease of one run held by this process (see the module docstring)."""

    def __init__(self, begin: Callable[[], AbstractContextManager[Connection]], run_id: str, where: str, *,
                 heartbeat_s: float = HEARTBEAT_S, stale_s: float = STALE_S) -> None:
        self.run_id, self.where = run_id, where
        self.owner = new_id()
        self.host, self.pid = socket.gethostname(), os.getpid()
        self._begin = begin
        self.heartbeat_s, self.stale_s = heartbeat_s, stale_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lost = False  # set when another process took the lease over

    def acquire(self) -> RunLease:
        try:
            self._take()
        except IntegrityError:  # another process inserted the row between our read and write
            raise RunLocked(f"{self.where}: run {self.run_id[:12]} is being started by another process; "
                            "wait for it to finish or stop it, then resume") from None
        self._thread = threading.Thread(target=self._beat, name="qdevolve-lease", daemon=True)
        self._thread.start()
        return self

    def _take(self) -> None:
        now = time.time()
        L = S.run_leases
        with self._begin() as c:
            row = c.execute(select(L).where(L.c.run_id == self.run_id)).first()
            if row is not None and row.owner != self.owner and not self._takeable(row, now):
                age = now - row.heartbeat_at
                raise RunLocked(
                    f"{self.where}: run {self.run_id[:12]} is being written by pid {row.pid} on {row.host} "
                    f"(heartbeat {age:.0f} s ago); wait for it to finish or stop it, then resume")
            c.execute(delete(L).where(L.c.run_id == self.run_id))
            c.execute(insert(L).values(run_id=self.run_id, owner=self.owner, host=self.host, pid=self.pid,
                                       acquired_at=now, heartbeat_at=now))

    def _takeable(self, row: Any, now: float) -> bool:
        if now - row.heartbeat_at > self.stale_s:
            return True
        return row.host == self.host and not _alive(int(row.pid))

    def _beat(self) -> None:
        L = S.run_leases
        while not self._stop.wait(self.heartbeat_s):
            try:
                with self._begin() as c:
                    n = c.execute(update(L).where(L.c.run_id == self.run_id, L.c.owner == self.owner)
                                  .values(heartbeat_at=time.time())).rowcount
                if n == 0:
                    self.lost = True
                    return
            except Exception:  # a busy database: try again at the next beat
                continue

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        L = S.run_leases
        with self._begin() as c:
            c.execute(delete(L).where(L.c.run_id == self.run_id, L.c.owner == self.owner))

    def __enter__(self) -> RunLease:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
