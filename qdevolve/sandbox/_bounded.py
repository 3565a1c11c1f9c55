"""Run a process with a wall clock and bounded output: :func:`run_bounded`.

Spawn argv in a new session with stdin ``/dev/null`` (or a pipe carrying ``stdin_data``),
drain stdout and stderr keeping only the last bytes of each, and SIGKILL the whole process
group when the wall clock fires. No ``preexec_fn`` (not thread-safe): the runner sets its
own rlimits.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass, field

__all__ = ["Captured", "Tail", "run_bounded"]


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


class Tail:
    """The last ``cap`` bytes of a stream, and how many bytes it carried."""

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
                cwd: str | None = None, pass_fds: tuple[int, ...] = (),
                stdout_cap: int | None = None, stdin_data: bytes | None = None) -> Captured:
    """Run ``argv`` in a new session; keep the last ``cap`` bytes of stderr and the last
    ``stdout_cap`` (default ``cap``) bytes of stdout.

    The whole process group gets SIGKILL at ``wall_s``; the backends put everything else
    in a pid namespace whose init dies with it, so nothing survives. Pipes are drained
    until EOF (or a short grace after the main process died) so a flooding child never blocks.
    """
    start = time.monotonic()
    stdin: int = subprocess.DEVNULL
    if stdin_data is not None:  # a few bytes (the nonce): they fit the pipe buffer
        stdin, w = os.pipe()
        os.write(w, stdin_data)
        os.close(w)
    try:
        proc = subprocess.Popen(
            argv, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=env, cwd=cwd, start_new_session=True, close_fds=True, pass_fds=pass_fds,
        )
    finally:
        if stdin_data is not None:
            os.close(stdin)
    caps = {"stdout": cap if stdout_cap is None else stdout_cap, "stderr": cap}
    tails = {k: Tail(c) for k, c in caps.items()}
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
        truncated=[k for k, t in tails.items() if t.total > caps[k]],
        runtime_s=time.monotonic() - start,
        cpu_s=cpu,
    )
