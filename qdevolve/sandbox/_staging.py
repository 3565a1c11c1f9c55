"""Staging: where the runner, evaluator copies and per-run work dirs live on the host.

* :class:`Staging`: one directory per backend instance (mode 0755, under the system temp
  dir) holding a copy of the trusted runner files and of each evaluator's directory (by
  content hash, :mod:`._evaldir`), readable by the trusted runner only, so it can read them
  wherever the repository lives and the candidate can neither read nor touch them; per-run
  work directories live under it and are removed after each run.
* :func:`remove_tree`: removal that no directory tree can break (no recursion limit).
* :func:`sandbox_python`, :func:`site_packages`: an interpreter and library paths the
  unprivileged sandbox uid can reach.
"""

from __future__ import annotations

import marshal
import os
import secrets
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path

from qdevolve.errors import EvaluationSetupError
from qdevolve.sandbox import runner as _runner_mod
from qdevolve.sandbox._evaldir import copy_dir, scan
from qdevolve.sandbox._proc import pid_alive
from qdevolve.sandbox._tree import stage_program
from qdevolve.sandbox.limits import SandboxLimits, render_rlimits
from qdevolve.types import Program

__all__ = ["Staging", "RunDir", "remove_tree", "remove_stale_staging", "sandbox_python",
           "site_packages", "world_accessible", "RUNNER_FILES"]

_HERE = Path(_runner_mod.__file__).parent
#: The trusted files staged for the sandbox (stdlib only; imported there as top-level modules).
RUNNER_FILES = ("runner.py", "_wire.py", "_standin.py", "candidate.py", "_mountview.py", "_procctl.py",
                "zygote.py", "_importguard.py", "_codeorigin.py")


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


@dataclass
class RunDir:
    """One evaluation's work directory and its nonce."""

    path: Path
    nonce: str
    program: str  # path as the sandbox sees it


def remove_tree(path: str | Path) -> None:
    """Remove ``path`` and everything under it; never raises, no recursion limit.

    ``rm -rf`` walks with file descriptors (fts), so a candidate that nests thousands of
    directories, or removes its own permissions, cannot make cleanup fail or crash the
    controller (``shutil.rmtree`` raises ``RecursionError`` on deep trees).
    """
    p = os.fspath(path)
    try:
        if not os.path.lexists(p):
            return
        quiet = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        if os.geteuid() != 0:  # a mode-000 directory stops rm for a normal user
            subprocess.run(["chmod", "-R", "u+rwx", "--", p], timeout=120, **quiet)
        subprocess.run(["rm", "-rf", "--one-file-system", "--", p], timeout=300, **quiet)
    except Exception:  # noqa: BLE001 - cleanup must never stop an evaluation or a new sandbox
        pass
    if os.path.lexists(p):
        try:
            shutil.rmtree(p, ignore_errors=True)
        except BaseException:  # noqa: BLE001 - RecursionError included
            pass


def remove_stale_staging(prefix: str = "qdevolve-") -> list[str]:
    """Remove staging directories whose owning controller died (e.g. SIGKILL)."""
    removed = []
    try:
        candidates = list(Path(tempfile.gettempdir()).glob(f"{prefix}*"))
    except OSError:
        return removed
    for d in candidates:
        try:
            pid = int((d / ".owner").read_text().split()[0])
            if pid_alive(pid):
                continue
        except (OSError, ValueError, IndexError):
            continue
        except Exception:  # noqa: BLE001 - a stale directory never stops a new sandbox
            continue
        remove_tree(d)
        removed.append(str(d))
    return removed


class Staging:
    """Per-backend directory with the runner, evaluator copies and per-run work dirs.

    The directory records its owner's pid; a later controller removes directories whose
    owner died without ``close()`` (:func:`remove_stale_staging`), and normal interpreter
    exit removes this one even when ``close()`` was never called.
    """

    def __init__(self, prefix: str = "qdevolve-sbx-", *, eval_group: int | None = None) -> None:
        remove_stale_staging()
        # the trusted runner's gid: the evaluator copies are root:eval_group, 0750/0640
        self.eval_group = eval_group if os.geteuid() == 0 else None
        self._copies: dict[tuple[str, str], Path] = {}
        self.root = Path(tempfile.mkdtemp(prefix=prefix))
        os.chmod(self.root, 0o755)
        (self.root / ".owner").write_text(f"{os.getpid()}\n")
        self._finalizer = weakref.finalize(self, remove_tree, str(self.root))
        self.runner_dir = self.root / "runner"
        self.runner_dir.mkdir(mode=0o755)
        for name in RUNNER_FILES:
            shutil.copyfile(_HERE / name, self.runner_dir / name)
            os.chmod(self.runner_dir / name, 0o644)
        self.eval_dir = self.root / "evaluators"
        self.eval_dir.mkdir(mode=0o755)
        self.work_root = self.root / "work"
        self.work_root.mkdir(mode=0o711)
        self._lock = threading.Lock()

    @property
    def runner(self) -> Path:
        return self.runner_dir / "runner.py"

    def evaluator(self, path: str | Path | None) -> Path | None:
        """The copy of the evaluator's directory (``<sha12>/``, made once per content) and
        the evaluator's path in it; readable by the runner's group only (see the module doc)."""
        if path is None:
            return None
        src = Path(path)
        found = scan(src)
        key = (str(src.resolve()), found.signature)
        with self._lock:
            done = self._copies.get(key)
            if done is not None and done.exists():
                return done
            tmp = Path(tempfile.mkdtemp(prefix=".copy-", dir=self.eval_dir))
            try:
                digest = copy_dir(found, tmp / "d", group=self.eval_group)[:12]
                dst = self.eval_dir / digest
                if not dst.exists():
                    os.replace(tmp / "d", dst)
            finally:
                remove_tree(tmp)
            out = dst / src.name
            self._copies[key] = out
            return out

    def new_run(self, program: Program, *, uid: int | None, gid: int | None, inner_dir: str | None,
                limits: SandboxLimits, evaluator: str | None, cascade: list[float] | None,
                sys_path: list[str], reap_keep: list[int] | None = None,
                parent: Path | None = None, view: dict | None = None,
                work_dir: str | None = None, nonce_in_file: bool = True,
                users: dict | None = None) -> RunDir:
        """Create the work dir with the program and the run file (nonce inside, 0600).

        ``inner_dir`` is where the sandbox sees the work dir (``None``: the host path; a
        ``{name}`` in it is replaced by the work dir's name).
        """
        path = Path(tempfile.mkdtemp(prefix="run-", dir=parent or self.work_root))
        inner = inner_dir.format(name=path.name) if inner_dir else str(path)
        nonce = secrets.token_hex(16)
        written = stage_program(path, program)
        name = written[0].relative_to(path).as_posix()
        cfg = {
            "nonce": nonce,
            "program": f"{inner}/{name}",
            "evaluator": evaluator,
            "cascade": cascade,
            "rlimits": render_rlimits(limits),
            "cpu_s": float(limits.cpu_s),
            "call_s": float(limits.call_s or limits.wall_s),
            # the runner stops the candidate a little before the controller's wall clock, so
            # a run that hits it still leaves a record (with the output tail)
            "run_s": float(limits.wall_s - min(1.0, 0.25 * limits.wall_s)),
            "output_bytes": int(limits.output_bytes),
            "sys_path": sys_path,
            "reap_keep": reap_keep,
        }
        if not nonce_in_file:  # it goes to the runner's stdin instead (process backends)
            del cfg["nonce"]
        if work_dir is not None:  # docker: the runner copies the program into this tmpfs
            cfg["work_dir"] = work_dir
            if len(written) > 1:  # a program tree: every file of it, at its relative path
                cfg["tree_files"] = [w.relative_to(path).as_posix() for w in written if w.is_file()]
        if users is not None:  # docker: {"runner": (uid, gid), "candidate": (uid, gid)}
            cfg["users"] = users
        if view is not None:  # local: the runner builds its view of the host, then drops root
            cfg.update(view=view, tmp_mb=int(limits.tmpfs_mb), work_mb=int(limits.work_mb),
                       drop_uid=uid, drop_gid=gid if gid is not None else uid)
        run_file = path / _runner_mod.RUN_FILE
        fd = os.open(run_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(marshal.dumps(cfg, 4))
        if uid is not None:
            for p in (path, *written, run_file):
                os.chown(p, uid, gid if gid is not None else uid)
        os.chmod(path, 0o700)
        return RunDir(path, nonce, cfg["program"])

    @staticmethod
    def remove_run(run: RunDir) -> None:
        remove_tree(run.path)

    def close(self) -> None:
        self._finalizer()


