"""Memory of one evaluation as a whole: a memory cgroup around its process tree.

``memory_mb`` caps what the *whole* tree of an evaluation holds (runner, evaluator,
candidate and every process they fork), as docker does for its containers, not each process
on its own. :func:`memory_enforcement` finds, once per controller, what this machine
allows, in this order:

1. **cgroup v2** (``/sys/fs/cgroup`` or the hybrid ``/sys/fs/cgroup/unified``): a child of
   the controller's own cgroup, or else of the hierarchy's root, with the ``memory``
   controller enabled; per evaluation
   ``memory.max`` = ``memory_mb``, ``memory.swap.max`` = 0 and ``memory.oom.group`` = 1
   (an OOM kill takes the whole tree);
2. **cgroup v1** memory controller (``/sys/fs/cgroup/memory``) where it is writable:
   ``memory.limit_in_bytes`` (and ``memory.memsw.limit_in_bytes``) = ``memory_mb``;
3. otherwise **per process only**: ``RLIMIT_AS`` = ``memory_mb`` for each of at most
   ``processes`` processes (``RLIMIT_NPROC``), so one evaluation may hold up to
   ``memory_mb`` x ``processes``; ``qdevolve sandbox check`` says so.

A process joins its cgroup before it runs anything (:meth:`MemoryCap.wrap` prefixes the
argv with a shell that writes its own pid to ``cgroup.procs`` and then execs), so every
descendant is born inside. An OOM kill anywhere in the tree makes the evaluation's status
``memory`` (:meth:`MemoryCap.oom_kills`). ``QDEVOLVE_CGROUP=off`` forces the fallback.
"""

from __future__ import annotations

import functools
import itertools
import logging
import os
import signal
import threading
import time
from pathlib import Path

__all__ = ["MemoryCap", "backend_memory_enforcement", "memory_enforcement", "new_cap"]

log = logging.getLogger("qdevolve.sandbox")

_MIB = 1 << 20
_counter = itertools.count()
_lock = threading.Lock()


def _own_cgroup(version: str) -> str | None:
    """The controller's cgroup path for ``version`` (``"v2"`` or the v1 ``"memory"``)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if version == "v2" and parts[0] == "0" and parts[1] == "":
            return parts[2]
        if version == "v1" and "memory" in parts[1].split(","):
            return parts[2]
    return None


def _write(path: Path, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


class _Root:
    """The controller's own parent cgroup for evaluations (created on first use)."""

    def __init__(self, version: str, base: Path) -> None:
        self.version, self.base = version, base

    def describe(self) -> str:
        if self.version == "v2":
            return f"cgroup v2 per evaluation (memory.max, whole process tree; {self.base})"
        return f"cgroup v1 memory controller per evaluation (memory.limit_in_bytes, whole process tree; {self.base})"


def _sweep(parent: Path) -> None:
    """Remove the evaluation cgroups of controllers that died without cleaning up."""
    try:
        stale = [p for p in parent.glob("qdevolve-*") if p.name[9:].isdigit()]
    except OSError:
        return
    for path in stale:
        pid = int(path.name[9:])
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, 0)
            continue  # its controller is alive
        except ProcessLookupError:
            pass
        except OSError:
            continue
        _remove_dir(path, wait_s=0.2)


def _probe_v2() -> _Root | None:
    for mount in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified")):
        if not (mount / "cgroup.controllers").exists():
            continue
        own = _own_cgroup("v2")
        # below the controller's own cgroup first; a cgroup that holds processes cannot
        # enable controllers for its children (the "no internal processes" rule), so the
        # hierarchy's root (systemd hosts, as root) is the second choice
        for parent in dict.fromkeys([mount / own.lstrip("/") if own else mount, mount]):
            root = _make_v2(parent)
            if root is not None:
                return root
    return None


def _make_v2(parent: Path) -> _Root | None:
    base = parent / f"qdevolve-{os.getpid()}"
    _sweep(parent)
    try:
        base.mkdir(exist_ok=True)
        if "memory" not in (base / "cgroup.controllers").read_text().split():
            _write(parent / "cgroup.subtree_control", "+memory")
        if "memory" not in (base / "cgroup.controllers").read_text().split():
            raise OSError("no memory controller")
        _write(base / "cgroup.subtree_control", "+memory")
    except OSError:
        _remove_dir(base, wait_s=0.0)
        return None
    return _Root("v2", base)


def _probe_v1() -> _Root | None:
    mount = Path("/sys/fs/cgroup/memory")
    own = _own_cgroup("v1")
    if own is None or not (mount / "memory.limit_in_bytes").exists():
        return None
    base = mount / own.lstrip("/") / f"qdevolve-{os.getpid()}"
    _sweep(base.parent)
    try:
        base.mkdir(exist_ok=True)
        probe = base / "probe"
        probe.mkdir(exist_ok=True)
        _write(probe / "memory.limit_in_bytes", str(64 * _MIB))
        probe.rmdir()
    except OSError:
        _remove_dir(base, wait_s=0.0)
        return None
    return _Root("v1", base)


@functools.lru_cache(maxsize=1)
def _root() -> _Root | None:
    if os.environ.get("QDEVOLVE_CGROUP", "").lower() in ("off", "0", "no", "false"):
        return None
    root = _probe_v2() or _probe_v1()
    if root is not None:
        import atexit

        atexit.register(_remove_dir, root.base)
    return root


def memory_enforcement() -> str:
    """One line: how ``memory_mb`` is enforced for the process backends on this machine."""
    root = _root()
    if root is None:
        if os.environ.get("QDEVOLVE_CGROUP", "").lower() in ("off", "0", "no", "false"):
            return ("per process only (RLIMIT_AS x RLIMIT_NPROC: up to memory_mb x processes per "
                    "evaluation); memory cgroups turned off by QDEVOLVE_CGROUP")
        return ("per process only (RLIMIT_AS x RLIMIT_NPROC: up to memory_mb x processes per "
                "evaluation); no writable memory cgroup here")
    return root.describe()


def backend_memory_enforcement(backend: str) -> str:
    """:func:`memory_enforcement` for the backend named ``backend`` (docker: its own cgroup)."""
    if backend == "docker":
        return "docker's cgroup per container (mem_limit = memory+swap, whole process tree)"
    return memory_enforcement()


def _kill_members(path: Path) -> None:
    try:
        pids = [int(p) for p in (path / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _remove_dir(path: Path, wait_s: float = 1.0) -> bool:
    """Kill what is left in ``path`` (and its children) and remove it; whether it is gone."""
    if not path.exists():
        return True
    for child in [p for p in path.iterdir() if p.is_dir()]:
        _remove_dir(child, wait_s)
    deadline = time.monotonic() + wait_s
    while True:
        _kill_members(path)
        try:
            path.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)


class MemoryCap:
    """One memory cgroup: an evaluation's (cold) or a warm template's (its jobs in turn)."""

    def __init__(self, root: _Root, path: Path) -> None:
        self.root, self.path = root, path
        self.version = root.version
        self._ooms = 0

    @property
    def procs(self) -> str:
        return str(self.path / "cgroup.procs")

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` started inside this cgroup (the shell joins it, then execs ``argv``)."""
        return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', self.procs, *argv]

    def usage(self) -> int:
        name = "memory.current" if self.version == "v2" else "memory.usage_in_bytes"
        try:
            return int((self.path / name).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return 0

    def resident(self) -> int:
        """Bytes held that cannot be reclaimed (anonymous memory and tmpfs files): a warm
        template's own share, on top of which a job gets its ``memory_mb``."""
        keys = ("anon", "shmem") if self.version == "v2" else ("rss", "shmem")
        total = 0
        try:
            for line in (self.path / "memory.stat").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key in keys:
                    total += int(value)
        except (OSError, ValueError):
            return self.usage()
        return total

    def set_limit(self, limit_bytes: int, *, group_kill: bool = True) -> None:
        """Cap the cgroup at ``limit_bytes`` of memory, no swap (raises ``OSError``)."""
        limit = str(int(limit_bytes))
        if self.version == "v2":
            _write(self.path / "memory.max", limit)
            for name, value in (("memory.swap.max", "0"), ("memory.oom.group", "1" if group_kill else "0")):
                if (self.path / name).exists():
                    _write(self.path / name, value)
            return
        memsw = self.path / "memory.memsw.limit_in_bytes"
        current = int((self.path / "memory.limit_in_bytes").read_text().split()[0])
        # v1 keeps memory <= memory+swap at every step: raise memsw first, lower it last
        if memsw.exists() and int(limit) > current:
            _write(memsw, limit)
        _write(self.path / "memory.limit_in_bytes", limit)
        if memsw.exists():
            _write(memsw, limit)

    def oom_kills(self) -> int:
        """OOM kills in this cgroup so far."""
        name = "memory.events" if self.version == "v2" else "memory.oom_control"
        try:
            for line in (self.path / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def remove(self) -> None:
        """Kill anything left in the cgroup and remove it."""
        if not _remove_dir(self.path):
            log.warning("sandbox memory cgroup %s could not be removed", self.path)


def new_cap(memory_mb: int | None, kind: str = "e") -> MemoryCap | None:
    """A fresh cgroup capped at ``memory_mb`` (none yet when ``None``: a warm template's,
    capped per job); ``None`` when there is no cgroup here (the rlimit fallback)."""
    root = _root()
    if root is None:
        return None
    with _lock:
        n = next(_counter)
    path = root.base / f"{kind}-{os.getpid()}-{n}"  # unique in forked controllers too
    try:
        path.mkdir()
        cap = MemoryCap(root, path)
        if memory_mb:
            cap.set_limit(int(memory_mb) * _MIB)
        return cap
    except OSError as exc:
        log.warning("sandbox memory cgroup %s: %s; this evaluation is capped per process only", path, exc)
        _remove_dir(path)
        return None
