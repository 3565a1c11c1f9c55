"""The pool of dedicated sandbox uids: one per concurrent evaluation, across controllers."""

from __future__ import annotations

import os
import tempfile
import threading
import time
from pathlib import Path

__all__ = ["UidPool"]


class UidPool:
    """Hands out one sandbox uid per concurrent evaluation (RLIMIT_NPROC counts per uid).

    A uid is held through an ``flock`` on ``<tmp>/qdevolve-uid-locks/<uid>``, so controllers
    in different processes never share one; the search starts at a random offset.
    """

    def __init__(self, base: int, size: int) -> None:
        self.all = range(base, base + size)
        self.used: set[int] = set()
        self._held: dict[int, int] = {}
        self._lock = threading.Lock()
        self._dir = Path(tempfile.gettempdir(), "qdevolve-uid-locks")
        self._dir.mkdir(mode=0o700, exist_ok=True)

    def acquire(self) -> int:
        import fcntl
        import random

        while True:
            start = random.randrange(len(self.all))
            # uids this pool used before first (already swept), then the rest from a random offset
            order = [*sorted(self.used), *(self.all[(start + i) % len(self.all)] for i in range(len(self.all)))]
            for uid in order:
                with self._lock:
                    if uid in self._held:
                        continue
                    fd = os.open(self._dir / str(uid), os.O_RDWR | os.O_CREAT, 0o600)
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except OSError:
                        os.close(fd)
                        continue
                    self._held[uid] = fd
                    self.used.add(uid)
                    return uid
            time.sleep(0.05)

    def release(self, uid: int) -> None:
        with self._lock:
            fd = self._held.pop(uid, None)
        if fd is not None:
            os.close(fd)
