"""Machinery shared by the process backends: staging, per-run work dirs, the bounded reader.

* :class:`Staging`: one directory per backend instance (mode 0755, under the system temp
  dir) holding a copy of the runner and of each evaluator (by content hash), so the sandbox
  uid can read them wherever the repository lives and the candidate can never touch the
  originals; per-run work directories live under it and are removed after each run.
* :func:`run_bounded`: spawn argv in a new session with stdin ``/dev/null``, drain stdout and
  stderr keeping only the last ``cap`` bytes of each, and kill the whole process group with
  SIGKILL when the wall clock fires. No ``preexec_fn`` (not thread-safe): the runner sets
  its own rlimits.
* :func:`sandbox_python`: an interpreter the unprivileged sandbox uid can execute.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from qdevolve.errors import EvaluationSetupError
from qdevolve.languages import extension as _language_extension
from qdevolve.sandbox import runner as _runner_mod
from qdevolve.sandbox.limits import SandboxLimits, render_rlimits
from qdevolve.types import Program

__all__ = ["Staging", "RunDir", "Captured", "run_bounded", "sandbox_python", "UidPool",
           "world_accessible", "site_packages", "sandbox_processes",
           "uid_processes"]

RUNNER_SOURCE = Path(_runner_mod.__file__)


def world_accessible(path: str | Path) -> bool:
    """Every ancestor directory is o+x and the path itself is o+r (o+x for directories)."""
    p = Path(os.path.realpath(path))
    try:
        for parent in reversed(p.parents):
            if not os.stat(parent).st_mode & 0o001:
                return False
        mode = os.stat(p).st_mode
    except OSError:
        return False
    return bool(mode & 0o004) and (not p.is_dir() or bool(mode & 0o001))


def sandbox_python(explicit: str | None = None) -> str:
    """An interpreter of the controller's minor version that any uid can execute.

    ``explicit`` wins; else ``sys.executable`` when world-accessible (its stdlib too); else
    ``/usr/bin/python3.X`` (e.g. a pyenv interpreter under ``/root`` is not reachable by the
    sandbox uid).
    """
    if explicit:
        return explicit
    ver = f"python{sys.version_info.major}.{sys.version_info.minor}"
    exe = os.path.realpath(sys.executable)
    stdlib = sysconfig.get_paths()["stdlib"]
    if world_accessible(exe) and world_accessible(stdlib):
        return exe
    for cand in (f"/usr/bin/{ver}", f"/usr/local/bin/{ver}"):
        if os.path.exists(cand) and world_accessible(cand):
            return cand
    raise EvaluationSetupError(
        f"no {ver} interpreter readable by an unprivileged uid ({exe} is not); install "
        f"{ver} under /usr or pass python=... to the sandbox"
    )


def site_packages() -> list[str]:
    """The controller's site-packages directories that any uid can read (so evaluators can
    import numpy & co.); the runner appends them to ``sys.path`` (no ``.pth`` processing)."""
    paths = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    return sorted(p for p in paths if os.path.isdir(p) and world_accessible(p))


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


@dataclass
class RunDir:
    """One evaluation's work directory and its nonce."""

    path: Path
    nonce: str
    program: str  # path as the sandbox sees it
    result: Path


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_staging(prefix: str = "qdevolve-") -> list[str]:
    """Remove staging directories whose owning controller died (e.g. SIGKILL)."""
    removed = []
    for d in Path(tempfile.gettempdir()).glob(f"{prefix}*"):
        owner = d / ".owner"
        try:
            pid = int(owner.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        if not _pid_alive(pid):
            shutil.rmtree(d, ignore_errors=True)
            removed.append(str(d))
    return removed


class Staging:
    """Per-backend directory with the runner, evaluator copies and per-run work dirs.

    The directory records its owner's pid; a later controller removes directories whose
    owner died without ``close()`` (:func:`remove_stale_staging`), and normal interpreter
    exit removes this one even when ``close()`` was never called.
    """

    def __init__(self, prefix: str = "qdevolve-sbx-") -> None:
        remove_stale_staging()
        self.root = Path(tempfile.mkdtemp(prefix=prefix))
        os.chmod(self.root, 0o755)
        (self.root / ".owner").write_text(f"{os.getpid()}\n")
        self._finalizer = weakref.finalize(self, shutil.rmtree, str(self.root), True)
        self.runner_dir = self.root / "runner"
        self.runner_dir.mkdir(mode=0o755)
        shutil.copyfile(RUNNER_SOURCE, self.runner_dir / "runner.py")
        os.chmod(self.runner_dir / "runner.py", 0o644)
        self.eval_dir = self.root / "evaluators"
        self.eval_dir.mkdir(mode=0o755)
        self.work_root = self.root / "work"
        self.work_root.mkdir(mode=0o711)
        self._lock = threading.Lock()

    @property
    def runner(self) -> Path:
        return self.runner_dir / "runner.py"

    def evaluator(self, path: str | Path | None) -> Path | None:
        """A read-only copy of the evaluator (``<sha12>/<name>``), made once per content."""
        if path is None:
            return None
        src = Path(path)
        try:
            data = src.read_bytes()
        except OSError as exc:
            raise EvaluationSetupError(f"evaluator {src} cannot be read: {exc.strerror or exc}") from exc
        digest = hashlib.sha256(data).hexdigest()[:12]
        dst = self.eval_dir / digest / src.name
        with self._lock:
            if not dst.exists():
                dst.parent.mkdir(mode=0o755, exist_ok=True)
                tmp = dst.with_suffix(".tmp")
                tmp.write_bytes(data)
                os.chmod(tmp, 0o444)
                os.replace(tmp, dst)
        return dst

    def new_run(self, program: Program, *, uid: int | None, gid: int | None, inner_dir: str | None,
                limits: SandboxLimits, evaluator: str | None, cascade: list[float] | None,
                sys_path: list[str], reap_keep: list[int] | None = None,
                parent: Path | None = None) -> RunDir:
        """Create the work dir with the program and the run file (nonce inside, 0600).

        ``inner_dir`` is where the sandbox sees the work dir (``None``: the host path; a
        ``{name}`` in it is replaced by the work dir's name).
        """
        path = Path(tempfile.mkdtemp(prefix="run-", dir=parent or self.work_root))
        inner = inner_dir.format(name=path.name) if inner_dir else str(path)
        nonce = secrets.token_hex(16)
        name = "program" + _language_extension(program.language)
        (path / name).write_text(program.code, encoding="utf-8")
        cfg = {
            "nonce": nonce,
            "program": f"{inner}/{name}",
            "evaluator": evaluator,
            "cascade": cascade,
            "rlimits": render_rlimits(limits),
            "sys_path": sys_path,
            "reap_keep": reap_keep,
        }
        run_file = path / _runner_mod.RUN_FILE
        fd = os.open(run_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(marshal.dumps(cfg, 4))
        if uid is not None:
            for p in (path, path / name, run_file):
                os.chown(p, uid, gid if gid is not None else uid)
        os.chmod(path, 0o700)
        return RunDir(path, nonce, cfg["program"], path / _runner_mod.RESULT_FILE)

    @staticmethod
    def remove_run(run: RunDir) -> None:
        shutil.rmtree(run.path, ignore_errors=True)

    def close(self) -> None:
        self._finalizer()


@dataclass
class Captured:
    """What :func:`run_bounded` saw."""

    returncode: int | None
    timed_out: bool
    stdout: str
    stderr: str
    truncated: list[str] = field(default_factory=list)
    runtime_s: float = 0.0
    cpu_s: float | None = None


class _Tail:
    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.buf = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self.buf += chunk
        if len(self.buf) > 2 * self.cap:
            del self.buf[: len(self.buf) - self.cap]

    def text(self) -> str:
        return bytes(self.buf[-self.cap:]).decode("utf-8", errors="replace")


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process group; never ``proc.kill()``: it polls and could reap the child
    behind :func:`os.wait4`'s back."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if proc.returncode is None:
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def run_bounded(argv: list[str], *, env: dict[str, str], wall_s: float, cap: int,
                cwd: str | None = None, pass_fds: tuple[int, ...] = ()) -> Captured:
    """Run ``argv`` in a new session; keep the last ``cap`` bytes of stdout/stderr each.

    The whole process group gets SIGKILL at ``wall_s``; the backends put everything else
    in a pid namespace whose init dies with it, so nothing survives. Pipes are drained
    until EOF (or a short grace after the main process died) so a flooding child never blocks.
    """
    start = time.monotonic()
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=env, cwd=cwd, start_new_session=True, close_fds=True, pass_fds=pass_fds,
    )
    tails = {"stdout": _Tail(cap), "stderr": _Tail(cap)}
    sel = selectors.DefaultSelector()
    assert proc.stdout is not None and proc.stderr is not None
    sel.register(proc.stdout, selectors.EVENT_READ, "stdout")
    sel.register(proc.stderr, selectors.EVENT_READ, "stderr")
    deadline = start + wall_s
    timed_out = False
    exited_at: float | None = None
    rusage = None
    returncode: int | None = None
    try:
        while sel.get_map():
            now = time.monotonic()
            if not timed_out and now >= deadline:
                timed_out = True
                _kill_group(proc)
            if exited_at is None:
                pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    exited_at, rusage = now, ru
                    returncode = os.waitstatus_to_exitcode(status)
                    proc.returncode = returncode
                    _kill_group(proc)  # anything left in the group (no pid namespace)
            if exited_at is not None and now - exited_at > 1.0:
                break  # a descendant outside the group keeps the pipe open: stop reading
            timeout = max(0.0, min(deadline - now, 0.05)) if not timed_out else 0.05
            for key, _ in sel.select(timeout):
                try:
                    chunk = os.read(key.fd, 65536)
                except OSError:
                    chunk = b""
                if chunk:
                    tails[key.data].add(chunk)
                else:
                    sel.unregister(key.fileobj)
        if exited_at is None:
            _, status, rusage = os.wait4(proc.pid, 0)
            returncode = os.waitstatus_to_exitcode(status)
            proc.returncode = returncode
    finally:
        sel.close()
        proc.stdout.close()
        proc.stderr.close()
        if proc.returncode is None:
            _kill_group(proc)
            try:
                _, status, rusage = os.wait4(proc.pid, 0)
                proc.returncode = os.waitstatus_to_exitcode(status)
            except ChildProcessError:
                pass
    cpu = None if rusage is None else rusage.ru_utime + rusage.ru_stime
    return Captured(
        returncode=returncode,
        timed_out=timed_out,
        stdout=tails["stdout"].text(),
        stderr=tails["stderr"].text(),
        truncated=[k for k, t in tails.items() if t.total > cap],
        runtime_s=time.monotonic() - start,
        cpu_s=cpu,
    )
