"""The ``local`` sandbox: a subprocess with rlimits, namespaces when possible, a wall clock.

Layers: a new session with stdin ``/dev/null``, an
environment allowlist, rlimits set by the runner itself, the controller's wall clock that
SIGKILLs the whole process group, and a bounded output reader. As root the runner also runs
in fresh pid (with its own ``/proc``), mount, ipc, uts and network namespaces
(``unshare --kill-child``), under an unprivileged uid (``setpriv``); as a normal user the same
namespaces are made inside a user namespace when the kernel allows it.

As root, the runner forks the candidate under a uid of its own and then drops to another
one (``_process``'s three principals); the evaluator's directory is a copy only the runner's
group reads, and the original is covered. This backend is still a development fallback, not
a security boundary: the program sees the rest of the host's file system with the rights of
its uid. Use ``bwrap`` or ``docker`` for untrusted code.
"""

from __future__ import annotations

import functools
import logging
import os
import subprocess
import tempfile
from collections.abc import Sequence

from qdevolve import registry
from qdevolve.sandbox._process import ProcessSandbox
from qdevolve.sandbox._tree import TreeCold
from qdevolve.sandbox._warm import WarmPath
from qdevolve.sandbox.bwrap import library_paths
from qdevolve.sandbox.limits import LOCAL_HIDDEN, SandboxLimits, render_local_argv

__all__ = ["LocalSandbox", "ProcessSandbox", "userns_available"]

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


@registry.sandbox("local")
class LocalSandbox(TreeCold, WarmPath, ProcessSandbox):
    """Subprocess sandbox; namespaces and an unprivileged uid when root (see module doc).

    Args:
        limits: Default :class:`SandboxLimits` (``evaluate`` may pass others).
        python: Interpreter for the runner (default: the controller's, or ``/usr/bin``'s).
        uid_base: First uid of the pool of sandbox uids (one per concurrent evaluation).
        uid_count: Size of that pool (shared, through lock files, by every controller).
        extra_sys_path: Directories appended to ``sys.path`` inside the sandbox.
        inherit_site_packages: Also append the controller's site-packages (read-only use).
        warm: Keep one pre-imported template per worker thread (``zygote.py``) that forks a
            fresh, isolated runner/candidate pair per evaluation (needs root or user
            namespaces; otherwise every evaluation is cold).
    """

    name = "local"

    def __init__(self, *, limits: SandboxLimits | None = None, python: str | None = None,
                 uid_base: int = 62000, uid_count: int = 2048, extra_sys_path: Sequence[str] = (),
                 inherit_site_packages: bool = True, warm: bool = False) -> None:
        super().__init__(limits=limits, python=python, uid_base=uid_base, uid_count=uid_count,
                         extra_sys_path=extra_sys_path, inherit_site_packages=inherit_site_packages)
        self.userns = (not self.as_root) and userns_available()
        self._libs = library_paths(self.python, self.sys_path)
        self._init_warm(warm and (self.as_root or self.userns))
        if not self.as_root and not self.userns:
            log.warning("local sandbox: no namespaces available; processes that call setsid() "
                        "can outlive an evaluation. Use bwrap or docker for untrusted code.")

    def _view(self, users, evaluator, source=None):
        """Hide the host's temp dirs, /run (UNIX sockets), homes, the project (other runs'
        databases) and the evaluator's own directory; keep the runner, the evaluator's copy
        (readable by the runner's group only), the interpreter and libraries."""
        if not (self.as_root or self.userns):
            return None
        keep = [str(self.staging.runner_dir), *self._libs]
        if evaluator is not None:
            keep.append(str(evaluator.parent))
        hide = [*LOCAL_HIDDEN, os.path.realpath(os.getcwd()), os.path.realpath(tempfile.gettempdir())]
        if source is not None:
            hide.append(os.path.dirname(os.path.realpath(source)))
        hide = [h for h in dict.fromkeys(hide)
                if h not in ("/", "/usr") and not h.startswith(("/usr/", "/proc", "/dev", "/sys"))]
        return {"keep": keep, "hide": hide}

    def _argv(self, run_dir, users, limits, env, evaluator):
        from qdevolve.sandbox.runner import RUN_FILE

        return render_local_argv(self.python, str(self.staging.runner), str(run_dir / RUN_FILE),
                                 as_root=self.as_root, limits=limits, userns=self.userns)

    # warm path --------------------------------------------------------------------------
    def _zygote_spec(self, limits):
        argv = render_local_argv(self.python, str(self.staging.runner_dir / "zygote.py"), "",
                                 as_root=self.as_root, limits=limits, userns=self.userns)[:-1]
        view = self._view(None, None)
        view["keep"].append(str(self.staging.eval_dir))  # digest dirs: the runner's group only
        return argv, view

    def _job_paths(self, evaluator, source=None):
        # every hidden directory (/tmp, /var/tmp, /run, homes...) gets a fresh tmpfs per job,
        # so nothing written there survives into the next; what the template keeps beneath
        # them (the staged evaluators: the runner's group only; libraries) is bound back; home
        # and temp files in the work dir, as in a cold run; the evaluator's own directory on
        # the host is covered
        view = self._view(None, None)
        fresh = [h for h in view["hide"] if os.path.isdir(h) and not os.path.islink(h)]
        under = [k for k in [*view["keep"], str(self.staging.eval_dir)]
                 if any(k == f or k.startswith(f.rstrip("/") + "/") for f in fresh)]
        hide = []
        if source is not None:
            d = os.path.dirname(os.path.realpath(source))
            kept = [str(self.staging.root), *self._libs]  # bound in the template's view: stay visible
            if d not in ("/", "/usr") and not d.startswith(("/usr/", "/proc", "/dev", "/sys")) and not any(
                    k == d or k.startswith(d + "/") for k in kept):
                hide.append(d)
        return {"evaluator": None if evaluator is None else str(evaluator), "fresh": fresh,
                "rebind": list(dict.fromkeys([*under, str(self.staging.eval_dir)])), "work": "/tmp/qdevolve-work",
                "home_work": True, "hide": hide}

    def _shell_style(self) -> bool:
        return self.as_root or self.userns

    def _reaps_namespace(self) -> bool:
        return self.as_root

    def _env(self, env, run_dir):
        # the host's /tmp is shared here: keep HOME and temp files inside the work dir
        return {**env, **{k: str(run_dir) for k in ("HOME", "TMPDIR") if env.get(k) == "/tmp"}}
