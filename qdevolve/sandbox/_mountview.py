"""The ``local`` sandbox's view of the host, built by the runner itself (stdlib + ctypes).

Staged next to ``runner.py``. Runs first thing in the runner when the run file carries a
``view`` (``local`` as root, or in a user namespace): the runner is then (namespace) root in
fresh mount, pid, ipc, uts and network namespaces, and with ``mount(2)`` calls (no helper
processes) it

1. opens the paths it must keep (the runner, the evaluator copy, the interpreter and
   site-packages) before anything is hidden;
2. covers the host's temp dirs, ``/run`` (UNIX sockets), homes and the project directory
   (other runs' databases) with empty size-limited tmpfs, and ``/dev/shm`` too;
3. binds the kept paths back read-only (from ``/proc/self/fd``, so a hidden parent does
   not hide them);
4. mounts the work directory as a tmpfs of ``work_mb`` (the disk quota) holding a copy of
   the program;

then drops to the sandbox uid (``setgroups``, ``setresgid``, ``setresuid``: every
capability goes with uid 0).
"""

from __future__ import annotations

import ctypes
import os

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
_libc = ctypes.CDLL(None, use_errno=True)


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def enc(s: str | None) -> bytes | None:
        return None if s is None else s.encode()

    if _libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {fstype or source} on {target}: {os.strerror(err)}")


def _tmpfs(target: str, size_mb: int, mode: str = "1777", extra: str = "") -> None:
    _mount("qdevolve", target, "tmpfs", MS_NOSUID | MS_NODEV, f"size={int(size_mb)}m,mode={mode}{extra}")


def build_view(view: dict, tmp_mb: int) -> None:
    """Hide ``view["hide"]`` under empty tmpfs, a private ``/dev/shm``, ``view["keep"]``
    bound back read-only."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    kept = []
    for path in view["keep"]:
        try:
            kept.append((os.open(path, os.O_PATH), path, os.path.isdir(path)))
        except OSError:
            continue
    for path in view["hide"]:
        if os.path.isdir(path) and not os.path.islink(path):
            _tmpfs(path, tmp_mb)
    _tmpfs("/dev/shm", tmp_mb)
    bind_back(kept)


def bind_back(kept: list) -> None:
    """Bind each ``(O_PATH fd, path, is_dir)`` of ``kept`` back at ``path``, read-only (a
    hidden parent does not hide it: the source is the descriptor); closes the descriptors."""
    for fd, path, is_dir in kept:
        if is_dir:
            os.makedirs(path, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if not os.path.exists(path):
                open(path, "wb").close()
        _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
        _mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
        os.close(fd)


def build(view: dict, run_dir: str, tmp_mb: int, work_mb: int) -> None:
    """Build the view described by ``view`` (``keep``, ``hide``) and the work dir; see the
    module doc."""
    files = {}
    for name in os.listdir(run_dir):
        with open(os.path.join(run_dir, name), "rb") as fh:
            files[name] = fh.read()
    build_view(view, tmp_mb)
    os.makedirs(run_dir, exist_ok=True)
    # root's and sticky, like /tmp: the candidate can add files but cannot rewrite, rename
    # or remove the program the evaluator reads
    _tmpfs(run_dir, work_mb, "1777")
    for name, data in files.items():
        path = os.path.join(run_dir, name)
        with open(path, "wb") as fh:
            fh.write(data)
        os.chmod(path, 0o444)


def drop(uid: int, gid: int) -> None:
    """Become ``uid:gid`` for good: no groups, no capabilities."""
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
