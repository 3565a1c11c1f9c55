"""`ProcessSandbox`: the ``evaluate`` shared by the ``local`` and ``bwrap`` backends.

One evaluation: take two dedicated uids (when root), one for the trusted runner and one for
the candidate, stage the program and run file in a fresh work directory, run the backend's
argv under :func:`~qdevolve.sandbox._bounded.run_bounded`, read the runner's record from its
stdout (accepted only from a clean exit), validate it, classify, clean up. Subclasses only
render argv.

Three principals (as root): the controller (root), the trusted runner (a pool uid, group
:attr:`ProcessSandbox.runner_gid`, the only group that may read the evaluator's directory)
and the candidate (another pool uid, no groups). The runner starts privileged in its
namespaces, forks the candidate under the candidate's uid, then drops to its own uid keeping
only ``CAP_KILL`` (to stop the candidate).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from qdevolve.sandbox import _cgroup
from qdevolve.sandbox._bounded import run_bounded
from qdevolve.sandbox._proc import kill_all, uid_processes
from qdevolve.sandbox._staging import Staging, sandbox_python, site_packages
from qdevolve.sandbox._uids import UidPool
from qdevolve.sandbox.evaluator import build_result, parse_record
from qdevolve.sandbox.limits import SandboxLimits, as_limits, render_env
from qdevolve.sandbox.runner import MAX_RECORD_BYTES
from qdevolve.sandbox.status import Outcome
from qdevolve.types import EvalResult, Program

__all__ = ["ProcessSandbox"]

log = logging.getLogger("qdevolve.sandbox")


class ProcessSandbox:
    """Common ``evaluate`` of the process backends; subclasses render the argv."""

    name = "process"

    def __init__(self, *, limits: SandboxLimits | None = None, python: str | None = None,
                 uid_base: int = 62000, uid_count: int = 2048, extra_sys_path: Sequence[str] = (),
                 inherit_site_packages: bool = True) -> None:
        self.limits = as_limits(limits) or SandboxLimits()
        self.python = sandbox_python(python)
        self.as_root = os.geteuid() == 0
        # the pool's first id is the runners' group (reads the evaluator copies); the others
        # are handed out two per evaluation: the runner's uid and the candidate's
        self.runner_gid = int(uid_base) if self.as_root else None
        self.uids = UidPool(uid_base + 1, uid_count - 1) if self.as_root else None
        self.sys_path = list(extra_sys_path) + (site_packages() if inherit_site_packages else [])
        self.staging = Staging(prefix=f"qdevolve-{self.name}-", eval_group=self.runner_gid)
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
            kill_all(uid_processes([uid]).get(uid, []))
        return uid

    def _release_uid(self, uid: int | None, *, wait_s: float = 2.0, final: bool = False,
                     clean: bool = False) -> None:
        """Hand ``uid`` back once none of its processes is left (a pid namespace is torn
        down asynchronously); survivors after ``wait_s`` are killed by pid. Never blocks
        the evaluation: uids still busy wait in a cooling list checked on later calls.
        ``clean``: the caller knows nothing of ``uid`` is left (no ``/proc`` scan needed)."""
        if self.uids is None:
            return
        if clean and uid is not None:
            self.uids.release(uid)
            uid = None
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
                    kill_all(pids)
                    log.warning("sandbox uid %d: killed %d surviving process(es)", u, len(pids))
                self.uids.release(u)
            pending = keep
            if not final:
                break
            time.sleep(0.01)
        with self._cool_lock:
            self._cooling.extend(pending)

    def _acquire_users(self) -> dict | None:
        """``{"runner": (uid, gid), "candidate": (uid, gid)}`` of one evaluation (root only)."""
        if self.uids is None:
            return None
        cand = self._acquire_uid()
        try:
            run = self._acquire_uid()
        except BaseException:
            self._release_uid(cand, clean=True)
            raise
        return {"runner": (run, self.runner_gid), "candidate": (cand, cand)}

    def _release_users(self, users: dict | None, *, clean: bool = False) -> None:
        if users is not None:
            self._release_uid(users["runner"][0], clean=clean)
            self._release_uid(users["candidate"][0], clean=clean)

    # subclasses -------------------------------------------------------------------------
    def _argv(self, run_dir: Path, users: dict | None, limits: SandboxLimits,
              env: dict[str, str], evaluator: Path | None) -> list[str]:
        raise NotImplementedError

    def _inner(self) -> str | None:
        return None

    def _view(self, users: dict | None, evaluator: Path | None, source: str | Path | None) -> dict | None:
        """What the runner hides and keeps of the host before it drops root (``local``);
        ``evaluator`` is the staged copy, ``source`` the original evaluator path."""
        return None

    def _evaluator_inner(self, evaluator: Path | None) -> str | None:
        return None if evaluator is None else str(evaluator)

    def _shell_style(self) -> bool:
        return False

    def _env(self, env: dict[str, str], run_dir: Path) -> dict[str, str]:
        """The sandbox environment for one run (``local`` points HOME/TMPDIR at the work dir)."""
        return env

    def _reaps_namespace(self) -> bool:
        """Whether the spawned process exits only after its whole pid namespace is gone
        (``unshare --fork`` waits for the namespace init, whose exit waits for the rest)."""
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
        users = self._acquire_users()
        run = None
        clean = False
        memory = None
        try:
            memory = _cgroup.new_cap(limits.memory_mb)  # the whole tree's memory (None: per process)
            run = self.staging.new_run(
                program, uid=None, gid=None, inner_dir=self._inner(), limits=limits,
                evaluator=self._evaluator_inner(ev),
                cascade=None if cascade_thresholds is None else [float(t) for t in cascade_thresholds],
                sys_path=self.sys_path, view=self._view(users, ev, evaluator), nonce_in_file=False,
                users=users,
            )
            env = self._env(render_env(limits, sys_path=self.sys_path), run.path)
            argv = self._argv(run.path, users, limits, env, ev)
            if memory is not None:
                argv = memory.wrap(argv)
            cap = run_bounded(argv, env=env, wall_s=limits.wall_s, cap=limits.output_bytes,
                              cwd=str(run.path), stdout_cap=MAX_RECORD_BYTES + 1,
                              stdin_data=run.nonce.encode())
            clean = not cap.timed_out and self._reaps_namespace()
            record, why = parse_record(cap.stdout, run.nonce,
                                       clean_exit=cap.returncode == 0 and not cap.timed_out)
            outcome = Outcome(
                exit_code=cap.returncode, shell_style=self._shell_style(), timed_out=cap.timed_out,
                oom_killed=memory is not None and memory.oom_kills() > 0,
                record=record, record_error=why, record_missing=record is None and why is None,
                cpu_s=limits.cpu_s, cpu_used_s=cap.cpu_s if self._rusage_complete() else None, stderr_tail=cap.stderr,
            )
            return build_result(outcome, runtime_s=cap.runtime_s, stdout="", stderr=cap.stderr,
                                truncated=[k for k in cap.truncated if k != "stdout"],
                                artifacts_bytes=limits.artifacts_bytes)
        except OSError as exc:  # the sandbox itself could not start (not the program's doing)
            return EvalResult(status="error", error=f"{self.name} sandbox failed to start: {exc}")
        except Exception as exc:  # noqa: BLE001 - evaluate never raises for what a program did
            log.exception("%s sandbox: evaluation failed", self.name)
            return EvalResult(status="error", error=f"{self.name} sandbox failed: {type(exc).__name__}: {exc}")
        finally:
            try:
                if run is not None:
                    self.staging.remove_run(run)
                if memory is not None:
                    memory.remove()
                self._release_users(users, clean=clean)
            except Exception:  # noqa: BLE001 - cleanup never turns a result into a crash
                log.exception("%s sandbox: cleanup failed", self.name)

    def close(self) -> None:
        """Wait for (or kill) the sandbox uids' last processes; remove the staging directory."""
        self._closed = True
        self._release_uid(None, final=True)
        self.staging.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
