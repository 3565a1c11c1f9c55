"""The ``bwrap`` sandbox: bubblewrap under an unprivileged uid (the default on Linux).

Order: drop to a dedicated uid with ``setpriv``
first (bwrap cannot switch uid inside its user namespace), then ``bwrap --unshare-all
--die-with-parent --new-session --clearenv``: read-only ``/usr`` and interpreter, a per-run
writable work directory, tmpfs ``/tmp``, a fresh ``/proc`` in a new pid namespace whose init
reaps and kills every orphan, no network. The runner sets rlimits on itself; the
controller's wall clock kills bwrap and, through ``--die-with-parent``, everything inside.
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
from qdevolve.sandbox._warm import WarmPath
from qdevolve.sandbox.limits import (
    SANDBOX_ROOT,
    SandboxLimits,
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
class BwrapSandbox(WarmPath, ProcessSandbox):
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

    def _job_paths(self, evaluator):
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

    def _argv(self, run_dir, uid, limits, env, evaluator):
        return render_bwrap_argv(
            self.python, str(self.staging.runner_dir), str(run_dir), uid=uid,
            gid=uid, limits=limits, env=env, ro_paths=self._ro,
            evaluator=None if evaluator is None else str(evaluator),
        )
