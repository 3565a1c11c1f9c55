"""The ``local`` sandbox: a subprocess with rlimits, namespaces when possible, a wall clock.

Layers (``research/qd-sandbox-style.md`` §B.6): a new session with stdin ``/dev/null``, an
environment allowlist, rlimits set by the runner itself, the controller's wall clock that
SIGKILLs the whole process group, and a bounded output reader. As root the runner also runs
in fresh pid (with its own ``/proc``), mount, ipc, uts and network namespaces
(``unshare --kill-child``), under an unprivileged uid (``setpriv``); as a normal user the same
namespaces are made inside a user namespace when the kernel allows it.

This backend is a development fallback, not a security boundary: the program still sees the
host's file system with the rights of the sandbox uid. Use ``bwrap`` or ``docker`` for
untrusted code.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from qdevolve import registry
from qdevolve.sandbox._common import (
    Staging,
    UidPool,
    run_bounded,
    sandbox_python,
    site_packages,
    uid_processes,
)
from qdevolve.sandbox.evaluator import build_result, read_record
from qdevolve.sandbox.limits import SandboxLimits, as_limits, render_env, render_local_argv
from qdevolve.sandbox.status import Outcome
from qdevolve.types import EvalResult, Program

__all__ = ["LocalSandbox", "userns_available"]

log = logging.getLogger(__name__)


@functools.lru_cache(maxsize=1)
def userns_available() -> bool:
    """Whether ``unshare --map-root-user`` with a pid namespace works here (probed once)."""
    try:
        r = subprocess.run(["unshare", "--map-root-user", "--pid", "--fork", "--mount-proc", "true"],
                           capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


def _kill_all(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


class ProcessSandbox:
    """Common ``evaluate`` of the process backends; subclasses render the argv."""

    name = "process"

    def __init__(self, *, limits: SandboxLimits | None = None, python: str | None = None,
                 uid_base: int = 62000, uid_count: int = 2048, extra_sys_path: Sequence[str] = (),
                 inherit_site_packages: bool = True) -> None:
        self.limits = as_limits(limits) or SandboxLimits()
        self.python = sandbox_python(python)
        self.as_root = os.geteuid() == 0
        self.uids = UidPool(uid_base, uid_count) if self.as_root else None
        self.sys_path = list(extra_sys_path) + (site_packages() if inherit_site_packages else [])
        self.staging = Staging(prefix=f"qdevolve-{self.name}-")
        self._closed = False
        self._cooling: list[tuple[int, float]] = []  # (uid, since): released once empty
        self._swept: set[int] = set()
        self._cool_lock = threading.Lock()

    # uid hygiene ------------------------------------------------------------------------
    def _acquire_uid(self) -> int | None:
        if self.uids is None:
            return None
        uid = self.uids.acquire()
        if uid not in self._swept:  # a crashed controller may have left something behind
            self._swept.add(uid)
            _kill_all(uid_processes([uid]).get(uid, []))
        return uid

    def _release_uid(self, uid: int | None, *, wait_s: float = 2.0, final: bool = False) -> None:
        """Hand ``uid`` back once none of its processes is left (a pid namespace is torn
        down asynchronously); survivors after ``wait_s`` are killed by pid. Never blocks
        the evaluation: uids still busy wait in a cooling list checked on later calls."""
        if self.uids is None:
            return
        with self._cool_lock:
            if uid is not None:
                self._cooling.append((uid, time.monotonic()))
            pending, self._cooling = self._cooling, []
        while pending:
            alive = uid_processes([u for u, _ in pending])
            keep = []
            for u, since in pending:
                pids = alive.get(u, [])
                if pids and time.monotonic() - since < wait_s:
                    keep.append((u, since))
                    continue
                if pids:
                    _kill_all(pids)
                    log.warning("sandbox uid %d: killed %d surviving process(es)", u, len(pids))
                self.uids.release(u)
            pending = keep
            if not final:
                break
            time.sleep(0.01)
        with self._cool_lock:
            self._cooling.extend(pending)

    # subclasses -------------------------------------------------------------------------
    def _argv(self, run_dir: Path, uid: int | None, limits: SandboxLimits,
              env: dict[str, str], evaluator: Path | None) -> list[str]:
        raise NotImplementedError

    def _inner(self) -> str | None:
        return None

    def _evaluator_inner(self, evaluator: Path | None) -> str | None:
        return None if evaluator is None else str(evaluator)

    def _shell_style(self) -> bool:
        return False

    def _rusage_complete(self) -> bool:
        """Whether the spawned process waits for the runner, so its rusage includes it."""
        return True

    # public -----------------------------------------------------------------------------
    def evaluate(self, program: Program, evaluator: str | Path | None = None,
                 limits: SandboxLimits | None = None, *,
                 cascade_thresholds: Sequence[float] | None = None) -> EvalResult:
        """Evaluate ``program`` with ``evaluator`` (``None``: run it as ``__main__``).

        Thread-safe; never raises for anything the program does.
        """
        if self._closed:
            raise RuntimeError(f"{self.name} sandbox is closed")
        limits = as_limits(limits) or self.limits
        ev = self.staging.evaluator(evaluator)
        uid = self._acquire_uid()
        run = None
        try:
            run = self.staging.new_run(
                program, uid=uid, gid=uid, inner_dir=self._inner(), limits=limits,
                evaluator=self._evaluator_inner(ev),
                cascade=None if cascade_thresholds is None else [float(t) for t in cascade_thresholds],
                sys_path=self.sys_path,
            )
            env = render_env(limits)
            argv = self._argv(run.path, uid, limits, env, ev)
            cap = run_bounded(argv, env=env, wall_s=limits.wall_s, cap=limits.output_bytes,
                              cwd=str(run.path))
            record, why = read_record(run.result, run.nonce)
            outcome = Outcome(
                exit_code=cap.returncode, shell_style=self._shell_style(), timed_out=cap.timed_out,
                record=record, record_error=why, record_missing=record is None and why is None,
                cpu_s=limits.cpu_s, cpu_used_s=cap.cpu_s if self._rusage_complete() else None, stderr_tail=cap.stderr,
            )
            return build_result(outcome, runtime_s=cap.runtime_s, stdout=cap.stdout,
                                stderr=cap.stderr, truncated=cap.truncated)
        except OSError as exc:  # the sandbox itself could not start (not the program's doing)
            return EvalResult(status="error", error=f"{self.name} sandbox failed to start: {exc}")
        finally:
            if run is not None:
                self.staging.remove_run(run)
            self._release_uid(uid)

    def close(self) -> None:
        """Wait for (or kill) the sandbox uids' last processes; remove the staging directory."""
        self._closed = True
        self._release_uid(None, final=True)
        self.staging.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@registry.sandbox("local")
class LocalSandbox(ProcessSandbox):
    """Subprocess sandbox; namespaces and an unprivileged uid when root (see module doc).

    Args:
        limits: Default :class:`SandboxLimits` (``evaluate`` may pass others).
        python: Interpreter for the runner (default: the controller's, or ``/usr/bin``'s).
        uid_base: First uid of the pool of sandbox uids (one per concurrent evaluation).
        uid_count: Size of that pool (shared, through lock files, by every controller).
        extra_sys_path: Directories appended to ``sys.path`` inside the sandbox.
        inherit_site_packages: Also append the controller's site-packages (read-only use).
    """

    name = "local"

    def __init__(self, *, limits: SandboxLimits | None = None, python: str | None = None,
                 uid_base: int = 62000, uid_count: int = 2048, extra_sys_path: Sequence[str] = (),
                 inherit_site_packages: bool = True) -> None:
        super().__init__(limits=limits, python=python, uid_base=uid_base, uid_count=uid_count,
                         extra_sys_path=extra_sys_path, inherit_site_packages=inherit_site_packages)
        self.userns = (not self.as_root) and userns_available()
        if not self.as_root and not self.userns:
            log.warning("local sandbox: no namespaces available; processes that call setsid() "
                        "can outlive an evaluation. Use bwrap or docker for untrusted code.")

    def _argv(self, run_dir, uid, limits, env, evaluator):
        from qdevolve.sandbox.runner import RUN_FILE

        return render_local_argv(self.python, str(self.staging.runner), str(run_dir / RUN_FILE),
                                 as_root=self.as_root, uid=uid or 0, gid=uid or 0, limits=limits,
                                 userns=self.userns)

    def _shell_style(self) -> bool:
        return self.as_root or self.userns
