"""The controller's side of the warm path: one zygote per worker thread (``zygote.py``).

:class:`WarmPath` is the ``evaluate`` of the process backends with ``warm=True`` (``local``
starts the template under ``unshare``, ``bwrap`` inside bubblewrap); a subclass renders the
template's argv and says where the evaluator and work dir appear.
:class:`Zygote` starts the template in its namespaces and waits until it is ready;
:meth:`Zygote.run` sends one job (in a memory file the template never reads: only the job's
own fork does) with three fresh pipes (record, stderr, nonce), reads the
record and the stderr tail under the wall clock, and returns what a cold run returns
(:class:`~qdevolve.sandbox._bounded.Captured`). A job past its wall clock kills the whole
zygote (its pid namespace takes every process with it); the next job starts a new one.
"""

from __future__ import annotations

import logging
import marshal
import os
import secrets
import select
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

from qdevolve.languages import extension as language_extension
from qdevolve.sandbox import _cgroup
from qdevolve.sandbox._bounded import Captured, Tail
from qdevolve.sandbox.evaluator import build_result, parse_record
from qdevolve.sandbox.limits import SandboxLimits, as_limits, render_env, render_rlimits
from qdevolve.sandbox.runner import MAX_RECORD_BYTES
from qdevolve.sandbox.status import Outcome
from qdevolve.types import EvalResult

__all__ = ["Zygote", "WarmPath"]

log = logging.getLogger("qdevolve.sandbox")


class WarmPath:
    """``evaluate`` through one warm template per (worker thread, network) (mixed into a
    :class:`~qdevolve.sandbox._process.ProcessSandbox`; see the module doc)."""

    warm = False

    def evaluate(self, program, evaluator=None, limits=None, *, cascade_thresholds=None):
        """As the process backend's ``evaluate`` (next in the MRO); with ``warm`` a fork of the worker's template."""
        if not self.warm:
            return super().evaluate(program, evaluator, limits, cascade_thresholds=cascade_thresholds)
        return self._evaluate_warm(program, evaluator, limits, cascade_thresholds)

    def close(self) -> None:
        self._close_warm()
        super().close()

    def _init_warm(self, warm: bool) -> None:
        self.warm = warm
        self._zygotes: dict[tuple[int, bool], Zygote] = {}
        self._zlock = threading.Lock()

    # what a backend provides ------------------------------------------------------------
    def _zygote_spec(self, limits: SandboxLimits) -> tuple[list[str], dict]:
        """argv of the template (without its three trailing arguments) and its view."""
        raise NotImplementedError

    def _job_paths(self, evaluator: Path | None, source: str | Path | None = None) -> dict:
        """``evaluator`` (the staged copy as the template sees it), ``rebind``, ``work``,
        ``home_work``, and ``hide`` (host directories to cover, e.g. the evaluator's own;
        ``source`` is the original evaluator path)."""
        raise NotImplementedError

    # ------------------------------------------------------------------------------------
    def _zygote(self, network: bool) -> Zygote:
        key = (threading.get_ident(), network)
        with self._zlock:
            z = self._zygotes.get(key)
        if z is None or not z.alive:
            limits = self.limits.replace(network=network)
            argv, view = self._zygote_spec(limits)
            memory = _cgroup.new_cap(None, "w")  # the template's cgroup; each job is capped in it
            try:
                z = Zygote(memory.wrap(argv) if memory else argv, {**view, "sys_path": self.sys_path},
                           self.limits.tmpfs_mb, render_env(limits, sys_path=self.sys_path), memory=memory)
            except BaseException:
                if memory is not None:
                    memory.remove()
                raise
            with self._zlock:
                self._zygotes[key] = z
        return z

    def _evaluate_warm(self, program, evaluator, limits, cascade_thresholds) -> EvalResult:
        if self._closed:
            raise RuntimeError(f"{self.name} sandbox is closed")
        limits = as_limits(limits) or self.limits
        ev = self.staging.evaluator(evaluator)
        try:
            zygote = self._zygote(limits.network)
        except OSError as exc:  # no template here (e.g. no capabilities to keep): evaluate cold
            log.warning("%s sandbox: the warm template does not start (%s); evaluating cold", self.name, exc)
            self.warm = False
            return super().evaluate(program, evaluator, limits, cascade_thresholds=cascade_thresholds)
        users = self._acquire_users()
        clean = False
        try:
            nonce = secrets.token_hex(16)
            job = {
                "program_source": program.code.encode("utf-8", "surrogateescape"),
                "program_name": "program" + language_extension(program.language),
                "cascade": None if cascade_thresholds is None else [float(t) for t in cascade_thresholds],
                "rlimits": render_rlimits(limits), "cpu_s": float(limits.cpu_s),
                "call_s": float(limits.call_s or limits.wall_s),
                "run_s": float(limits.wall_s - min(1.0, 0.25 * limits.wall_s)),
                "output_bytes": int(limits.output_bytes), "sys_path": self.sys_path, "users": users,
                "tmp_mb": int(limits.tmpfs_mb), "work_mb": int(limits.work_mb),
                "env": render_env(limits, sys_path=self.sys_path),
                **self._job_paths(ev, evaluator),
            }
            memory, ooms = zygote.memory, 0
            if memory is not None:  # the job's tree gets memory_mb on top of the template's own
                memory.set_limit(memory.resident() + int(limits.memory_mb) * (1 << 20), group_kill=False)
                ooms = memory.oom_kills()
            cap = zygote.run(job, nonce, wall_s=limits.wall_s, cap=limits.output_bytes,
                             stdout_cap=MAX_RECORD_BYTES + 1)
            oom = memory is not None and memory.oom_kills() > ooms
            clean = not cap.timed_out
            record, why = parse_record(cap.stdout, nonce, clean_exit=cap.returncode == 0 and not cap.timed_out)
            outcome = Outcome(exit_code=cap.returncode, shell_style=True, timed_out=cap.timed_out, oom_killed=oom,
                              record=record, record_error=why, record_missing=record is None and why is None,
                              cpu_s=limits.cpu_s, cpu_used_s=None, stderr_tail=cap.stderr)
            return build_result(outcome, runtime_s=cap.runtime_s, stdout="", stderr=cap.stderr,
                                truncated=[k for k in cap.truncated if k != "stdout"],
                                artifacts_bytes=limits.artifacts_bytes)
        except OSError as exc:
            return EvalResult(status="error", error=f"{self.name} warm sandbox failed: {exc}")
        finally:
            self._release_users(users, clean=clean)

    def _close_warm(self) -> None:
        with self._zlock:
            zygotes, self._zygotes = list(self._zygotes.values()), {}
        for z in zygotes:
            z.kill()


def _job_file(job: dict) -> int:
    """A memory file holding ``job`` (``marshal``), for the job's process alone."""
    data = marshal.dumps(job)
    fd = os.memfd_create("qdevolve-job", os.MFD_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except BaseException:
        os.close(fd)
        raise
    return fd


class Zygote:
    """One warm template process (see the module doc)."""

    def __init__(self, argv: list[str], view: dict, tmp_mb: int, env: dict[str, str], *,
                 start_s: float = 30.0, memory: _cgroup.MemoryCap | None = None) -> None:
        self.memory = memory  # the template's memory cgroup (``_cgroup``), capped per job
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
        if self.memory is not None:
            self.memory.remove()
            self.memory = None

    def run(self, job: dict, nonce: str, *, wall_s: float, cap: int, stdout_cap: int) -> Captured:
        """One evaluation in a fresh fork of the template."""
        start = time.monotonic()
        rec_r, rec_w = os.pipe()
        err_r, err_w = os.pipe()
        nonce_r, nonce_w = os.pipe()
        os.write(nonce_w, nonce.encode())
        os.close(nonce_w)
        job_fd = _job_file(job)
        try:  # the job travels in a memory file the template passes on unread
            socket.send_fds(self.sock, [b"job"], [job_fd, rec_w, err_w, nonce_r])
        finally:
            for fd in (job_fd, rec_w, err_w, nonce_r):
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
