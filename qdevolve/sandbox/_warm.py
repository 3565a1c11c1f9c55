"""The controller's side of the warm path: one zygote per worker thread (``zygote.py``).

:class:`Zygote` starts the template in its namespaces and waits until it is ready;
:meth:`Zygote.run` sends one job with three fresh pipes (record, stderr, nonce), reads the
record and the stderr tail under the wall clock, and returns what a cold run returns
(:class:`~qdevolve.sandbox._bounded.Captured`). A job past its wall clock kills the whole
zygote (its pid namespace takes every process with it); the next job starts a new one.
"""

from __future__ import annotations

import marshal
import os
import select
import signal
import socket
import subprocess
import time

from qdevolve.sandbox._bounded import Captured, Tail

__all__ = ["Zygote"]


class Zygote:
    """One warm template process (see the module doc)."""

    def __init__(self, argv: list[str], view: dict, tmp_mb: int, env: dict[str, str], *,
                 start_s: float = 30.0) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock = ours
        full = [*argv, str(theirs.fileno()), marshal.dumps(view).hex(), str(int(tmp_mb))]
        self.proc = subprocess.Popen(full, pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     start_new_session=True, close_fds=True, env=env)
        theirs.close()
        self.alive = True
        ready, _, _ = select.select([ours], [], [], start_s)
        msg = ours.recv(4096) if ready else b""
        if not msg or marshal.loads(msg) != ("ready",):
            err = b""
            self.kill()
            try:
                err = self.proc.stderr.read(4000) if self.proc.stderr else b""
            except (OSError, ValueError):
                pass
            raise OSError(f"warm sandbox template did not start: {err.decode('utf-8', 'replace').strip()[-500:]}")
        self.proc.stderr.close()

    def kill(self) -> None:
        self.alive = False
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        self.sock.close()

    def run(self, job: dict, nonce: str, *, wall_s: float, cap: int, stdout_cap: int) -> Captured:
        """One evaluation in a fresh fork of the template."""
        start = time.monotonic()
        rec_r, rec_w = os.pipe()
        err_r, err_w = os.pipe()
        nonce_r, nonce_w = os.pipe()
        os.write(nonce_w, nonce.encode())
        os.close(nonce_w)
        try:
            socket.send_fds(self.sock, [marshal.dumps(job)], [rec_w, err_w, nonce_r])
        finally:
            for fd in (rec_w, err_w, nonce_r):
                os.close(fd)
        tails = {rec_r: Tail(stdout_cap), err_r: Tail(cap)}
        open_fds = {rec_r, err_r}
        code: int | None = None
        timed_out = False
        deadline = start + wall_s
        try:
            while open_fds or code is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    timed_out = True
                    self.kill()
                    break
                watch = [*open_fds] + ([self.sock] if code is None else [])
                ready, _, _ = select.select(watch, [], [], min(left, 1.0))
                for r in ready:
                    if r is self.sock:
                        msg = self.sock.recv(4096)
                        if not msg:  # the template died
                            self.alive = False
                            code = code if code is not None else 137
                            continue
                        code = int(marshal.loads(msg)[1])
                        continue
                    chunk = os.read(r, 65536)
                    if chunk:
                        tails[r].add(chunk)
                    else:
                        open_fds.discard(r)
                if code is not None and open_fds and time.monotonic() - start > wall_s:
                    break
        finally:
            os.close(rec_r)
            os.close(err_r)
        out, err = tails[rec_r], tails[err_r]
        return Captured(returncode=None if timed_out else code, timed_out=timed_out,
                        stdout=out.text(), stderr=err.text(),
                        truncated=[k for k, t in (("stdout", out), ("stderr", err)) if t.total > t.cap],
                        runtime_s=time.monotonic() - start)
