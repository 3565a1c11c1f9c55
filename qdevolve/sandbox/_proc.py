"""Processes of the sandbox uids on the host: find them by real uid, check a pid, kill."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable

__all__ = ["uid_processes", "sandbox_processes", "pid_alive", "kill_all"]


def uid_processes(uids: Iterable[int], *, zombies: bool = False) -> dict[int, list[int]]:
    """Host pids by real uid, for the given uids (zombies only if asked: an orphan the
    host's init has not reaped yet holds no resources)."""
    wanted = set(uids)
    found: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as fh:
                state = ""
                for line in fh:
                    if line.startswith("State:"):
                        state = line.split()[1]
                    elif line.startswith("Uid:"):
                        uid = int(line.split()[1])
                        if uid in wanted and (zombies or state != "Z"):
                            found.setdefault(uid, []).append(int(entry))
                        break
        except (OSError, ValueError, IndexError):
            continue
    return found


def sandbox_processes(uids: Iterable[int], *, zombies: bool = False) -> list[int]:
    """Host pids whose real uid is one of ``uids``."""
    return sorted(p for pids in uid_processes(uids, zombies=zombies).values() for p in pids)


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` exists (a pid of another uid counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kill_all(pids: Iterable[int]) -> None:
    """SIGKILL each pid; already gone is fine."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
