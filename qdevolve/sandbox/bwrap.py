"""The ``bwrap`` sandbox: bubblewrap under an unprivileged uid (the default on Linux).

As root (:func:`render_bwrap_root_argv`): ``bwrap`` without a user namespace, every
capability dropped but ``CAP_SETUID``, ``CAP_SETGID`` and ``CAP_KILL``: read-only ``/usr``
and interpreter, the evaluator's directory (a copy only the runner's group reads) at
``/qdevolve/evaluator``, a per-run work directory (tmpfs, root's and sticky, the program
read-only in it), tmpfs ``/tmp``, a fresh ``/proc`` in a new pid namespace whose init (the
runner) reaps and kills every orphan, no network. The runner forks the candidate under the
candidate's uid, then drops to its own uid keeping only ``CAP_KILL`` (three principals, as
``docker``). Not root: ``setpriv``-free ``bwrap --unshare-all`` under the caller's uid, which
the runner and the candidate then share. The runner sets rlimits on itself; the controller's
wall clock kills bwrap and, through ``--die-with-parent``, everything inside.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Sequence
from pathlib import Path

from qdevolve import registry
from qdevolve.errors import EvaluationSetupError
from qdevolve.sandbox._process import ProcessSandbox
from qdevolve.sandbox._tree import TreeCold
from qdevolve.sandbox._warm import WarmPath
from qdevolve.sandbox.limits import (
    _MIB,
    SANDBOX_ROOT,
    SandboxLimits,
    bwrap_root_head,
    mount_parents,
    render_bwrap_argv,
    render_bwrap_zygote_argv,
)

__all__ = ["BwrapSandbox", "bwrap_available"]

log = logging.getLogger(__name__)


@functools.lru_cache(maxsize=1)
def bwrap_available() -> bool:
    """Whether bubblewrap can build a sandbox here (probed once, as the sandbox would run)."""
    exe = shutil.which("bwrap")
    if not exe:
        return False
    argv = [exe, "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/lib", "/lib64"):
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    argv += ["--proc", "/proc", "--dev", "/dev", "--", "/bin/sh", "-c", "true"]
    if os.geteuid() == 0 and shutil.which("setpriv"):
        argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", *argv]
    try:
        return subprocess.run(argv, capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def library_paths(python: str, sys_path: Sequence[str]) -> list[str]:
    """Interpreter prefix and site-packages to bind read-only (paths outside /usr)."""
    paths = {os.path.dirname(os.path.dirname(os.path.realpath(python)))}
    if os.path.realpath(python) == os.path.realpath(sys.executable):
        paths.add(sysconfig.get_paths()["stdlib"])
    paths.update(sys_path)
    out = sorted(p for p in paths if p and p not in ("/", "/usr") and not p.startswith("/usr/"))
    # drop paths nested under another bound path
    return [p for p in out if not any(p != q and p.startswith(q + "/") for q in out)]


@registry.sandbox("bwrap")
class BwrapSandbox(TreeCold, WarmPath, ProcessSandbox):
    """bubblewrap sandbox (see module doc); options as :class:`~qdevolve.sandbox.LocalSandbox`.

    ``warm=True`` (needs root; otherwise every evaluation is cold, with a warning): one
    template per worker thread, started inside bubblewrap with only ``CAP_SYS_ADMIN``,
    ``CAP_SETUID`` and ``CAP_SETGID`` kept, forks a fresh runner/candidate pair per
    evaluation in new mount, pid and ipc namespaces with a fresh ``/tmp``, ``/dev/shm`` and
    work dir, under the evaluation's own uid (``zygote.py``).
    """

    name = "bwrap"

    def __init__(self, *, limits: SandboxLimits | None = None, python: str | None = None,
                 uid_base: int = 62000, uid_count: int = 2048, extra_sys_path: Sequence[str] = (),
                 inherit_site_packages: bool = True, warm: bool = False) -> None:
        if not shutil.which("bwrap"):
            raise EvaluationSetupError("the bwrap sandbox needs bubblewrap: apt-get install bubblewrap")
        super().__init__(limits=limits, python=python, uid_base=uid_base, uid_count=uid_count,
                         extra_sys_path=extra_sys_path, inherit_site_packages=inherit_site_packages)
        self._ro = self._ro_paths()
        if warm and not self.as_root:
            log.warning("bwrap sandbox: the warm path needs root (the template keeps the "
                        "capabilities to mount per evaluation); evaluating cold")
        self._init_warm(warm and self.as_root)

    # warm path --------------------------------------------------------------------------
    def _zygote_spec(self, limits):
        from qdevolve.sandbox.limits import render_env

        argv = render_bwrap_zygote_argv(
            self.python, str(self.staging.runner_dir), str(self.staging.eval_dir), limits=limits,
            env=render_env(limits, sys_path=self.sys_path), ro_paths=self._ro)
        return argv, {}

    def _job_paths(self, evaluator, source=None):
        inner = None if evaluator is None else (
            f"{SANDBOX_ROOT}/evaluators/{evaluator.parent.name}/{evaluator.name}")
        return {"evaluator": inner, "work": f"{SANDBOX_ROOT}/work", "home_work": False,
                "rebind": [p for p in self._ro if p == "/tmp" or p.startswith("/tmp/")]}

    def _ro_paths(self) -> list[str]:
        return library_paths(self.python, self.sys_path)

    def _inner(self) -> str:
        return f"{SANDBOX_ROOT}/work"

    def _evaluator_inner(self, evaluator: Path | None) -> str | None:
        return None if evaluator is None else f"{SANDBOX_ROOT}/evaluator/{evaluator.name}"

    def _shell_style(self) -> bool:
        return True

    def _rusage_complete(self) -> bool:
        return False  # bwrap exits without waiting for its pid-namespace init

    def _argv(self, run_dir, users, limits, env, evaluator):
        if users is not None:
            return render_bwrap_root_argv(
                self.python, str(self.staging.runner_dir), str(run_dir), limits=limits, env=env,
                ro_paths=self._ro, evaluator_dir=None if evaluator is None else str(evaluator.parent))
        argv = render_bwrap_argv(
            self.python, str(self.staging.runner_dir), str(run_dir), uid=None,
            gid=None, limits=limits, env=env, ro_paths=self._ro, evaluator=None)
        if evaluator is not None:  # the evaluator's whole directory, as in the root argv
            end = argv.index("--")
            argv[end:end] = ["--ro-bind", str(evaluator.parent), f"{SANDBOX_ROOT}/evaluator"]
        return argv


#: What the cold runner keeps of root's capabilities: the candidate's and its own uid, and
#: (kept past the switch) stopping the candidate.
BWRAP_ROOT_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_KILL")


def render_bwrap_root_argv(python: str, runner_dir: str, workdir: str, *, limits: SandboxLimits,
                           env: dict[str, str], ro_paths: list[str], evaluator_dir: str | None) -> list[str]:
    """argv of a cold ``bwrap`` evaluation started as root (see the module doc).

    New ipc, pid, uts, cgroup and (unless ``limits.network``) network namespaces, no user
    namespace (the runner must switch between real uids); the mount points' parents 0755;
    the work dir a tmpfs of ``work_mb``, root's and sticky (mode 1777), with the program and
    the run file (root's, 0600) bound read-only.
    """
    argv = bwrap_root_head(limits, env, BWRAP_ROOT_CAPS)
    argv += ["--perms", "1777", "--size", str(int(limits.tmpfs_mb) * _MIB), "--tmpfs", "/tmp"]
    ro = [p for p in ro_paths if not p.startswith("/usr/")]
    work = f"{SANDBOX_ROOT}/work"
    for d in mount_parents([*ro, f"{SANDBOX_ROOT}/runner", f"{SANDBOX_ROOT}/evaluator", work]):
        argv += ["--perms", "0755", "--dir", d]
    for path in ro:
        argv += ["--ro-bind", path, path]
    argv += ["--ro-bind", runner_dir, f"{SANDBOX_ROOT}/runner"]
    if evaluator_dir:
        argv += ["--ro-bind", evaluator_dir, f"{SANDBOX_ROOT}/evaluator"]
    argv += ["--perms", "1777", "--size", str(int(limits.work_mb) * _MIB), "--tmpfs", work]
    try:  # what was staged: program.<ext>, or a program tree's top-level files and directories
        programs = sorted(n for n in os.listdir(workdir) if n != ".qdevolve-run") or ["program.py"]
    except OSError:
        programs = ["program.py"]
    for name in (*programs, ".qdevolve-run"):
        argv += ["--ro-bind", f"{workdir}/{name}", f"{work}/{name}"]
    argv += ["--proc", "/proc", "--dev", "/dev",
             "--perms", "1777", "--size", str(int(limits.tmpfs_mb) * _MIB), "--tmpfs", "/dev/shm",
             "--chdir", work,
             "--", python, "-I", "-S", f"{SANDBOX_ROOT}/runner/runner.py", f"{work}/.qdevolve-run"]
    return argv
