"""The pool of dedicated sandbox uids: one per concurrent evaluation, across controllers."""

from __future__ import annotations

import os
import tempfile
import threading
import time
from pathlib import Path

__all__ = ["UidPool", "check_uid_range"]


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


def check_uid_range(base: object, count: object) -> str | None:
    """Why the sandbox uid range ``[base, base + count)`` is unsafe, or ``None`` when it is safe.

    The sandbox runs candidates as these uids and, after each evaluation, kills every process
    they own; so none of them may be 0, the controller's own uid, a uid with a passwd entry
    (a real account or a system service) or a uid owning a running process, unless that
    process belongs to another controller's evaluation (its uid lock is held right now).
    """
    import pwd

    if isinstance(base, bool) or isinstance(count, bool) or not isinstance(base, int) or not isinstance(count, int):
        return f"uid_base and uid_count must be whole numbers, got {base!r} and {count!r}"
    if count < 1 or count > 1 << 20:
        return f"uid_count must be between 1 and {1 << 20}, got {count}"
    if base < 1 or base + count > 2**32 - 2:
        return f"the range {base}..{base + count - 1} must lie within 1..{2**32 - 3} (uid 0 is root)"
    span = range(base, base + count)
    if os.getuid() in span or os.geteuid() in span:
        return f"the range {base}..{base + count - 1} holds the controller's own uid {os.getuid()}"
    named = sorted(p.pw_uid for p in pwd.getpwall() if p.pw_uid in span)
    if named:
        return (f"uid {named[0]} in {base}..{base + count - 1} has a passwd entry "
                f"({pwd.getpwuid(named[0]).pw_name}); choose a range no account uses")
    busy = sorted(u for u in _process_uids() if u in span and not _lock_held(u))
    if busy:
        return (f"uid {busy[0]} in {base}..{base + count - 1} owns a running process that is no sandbox "
                "evaluation; choose a range no process uses")
    return None


def _process_uids() -> set[int]:
    """Every uid (real, effective, saved, filesystem) of every process in ``/proc``."""
    out: set[int] = set()
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return out
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as fh:
                for line in fh:
                    if line.startswith("Uid:"):
                        out.update(int(x) for x in line.split()[1:5])
                        break
        except (OSError, ValueError):
            continue  # the process ended meanwhile
    return out


def _lock_held(uid: int) -> bool:
    """True when some controller holds this uid's lock (its process is a live evaluation)."""
    import fcntl

    path = Path(tempfile.gettempdir(), "qdevolve-uid-locks", str(uid))
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)
