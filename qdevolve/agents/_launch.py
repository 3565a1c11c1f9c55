"""Start one agent's process as the sandbox's candidate principal, and end its whole tree.

The agent runs ``python -I -S _boot.py config.json`` (the interpreter the sandbox uses for
candidates) in a stage directory holding the bootstrap, the ``qdevolve_agent`` module, the
sandbox's ``_mountview``/``_procctl`` helpers, ``agent.py`` and ``config.json``:

* ``local``: as root, in new pid/mount/ipc/uts/net namespaces (``render_local_argv``); the
  bootstrap hides what the ``local`` sandbox hides (temp dirs, ``/run``, homes, the project
  directory) plus the qdevolve repository and the tools' private paths (the task's
  evaluator directory), copies the stage into a private tmpfs (its cwd), then drops to a
  candidate uid from the sandbox's pool.  Without root: the same namespaces under a user
  namespace when the kernel allows it (every capability dropped once the view is built),
  else a bare process in its own session (a development fallback, as the ``local``
  sandbox's: the host is visible with the user's rights, and a process that calls
  ``setsid()`` can outlive the run).
* ``bwrap``: the bwrap sandbox's root confinement (``bwrap_root_head``: read-only system
  directories, private ``/tmp`` and ``/dev/shm``, new pid/ipc/uts/net namespaces), the stage
  read-only at ``/qdevolve/agent``, a tmpfs work directory as cwd, and the bootstrap drops to
  the candidate uid; without root ``bwrap --unshare-all`` under the caller's uid.

Every case: stdin ``/dev/null``, stdout and stderr into one bounded tail, rlimits (address
space = ``memory_mb``, CPU, file size, open files, processes when the uid is the agent's
own), a memory cgroup around the tree where the machine has one, and two pipes, passed as
inherited descriptors, as the only channel to the controller.  :func:`terminate` kills the
process group, every process of the candidate uid and the cgroup's members.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import qdevolve
from qdevolve.agents.interface import AgentBudget
from qdevolve.sandbox import _cgroup
from qdevolve.sandbox._proc import kill_all, uid_processes
from qdevolve.sandbox.limits import (
    _MIB,
    LOCAL_HIDDEN,
    SANDBOX_ROOT,
    SandboxLimits,
    bwrap_root_head,
    mount_parents,
    render_env,
    render_local_argv,
    render_rlimits,
)

__all__ = ["Launched", "launch", "terminate", "LOG_BYTES"]

#: Bytes of the agent's output (stdout and stderr together) kept: the tail.
LOG_BYTES = 16 * 1024
#: Processes the agent's own uid may run at once.
AGENT_PROCESSES = 32

_HERE = Path(__file__).resolve().parent
_SANDBOX = Path(qdevolve.__file__).resolve().parent / "sandbox"
_STAGED = {"_boot.py": _HERE / "_boot.py", "qdevolve_agent.py": _HERE / "_agent_module.py",
           "_mountview.py": _SANDBOX / "_mountview.py", "_procctl.py": _SANDBOX / "_procctl.py"}
_BWRAP_STAGE = f"{SANDBOX_ROOT}/agent"
_BWRAP_WORK = f"{SANDBOX_ROOT}/work"


@dataclass
class Launched:
    """A running agent process and what must be cleaned up after it."""

    proc: subprocess.Popen
    requests: int  # the controller reads the agent's requests here
    replies: int  # and writes its replies here (non-blocking)
    stage: Path
    box: Any
    uid: int | None
    memory: Any
    shell_style: bool
    tail: bytearray = field(default_factory=bytearray)
    reader: threading.Thread | None = None
    stop: threading.Event = field(default_factory=threading.Event)


def agent_limits(budget: AgentBudget) -> SandboxLimits:
    """The sandbox limits an agent's process runs under (from its budget)."""
    return SandboxLimits(wall_s=budget.wall_s, cpu_s=budget.wall_s + 1, memory_mb=budget.memory_mb,
                         processes=AGENT_PROCESSES, tmpfs_mb=64, work_mb=64, open_files=128)


def repository_root() -> str:
    """The directory holding the imported ``qdevolve`` package (the source checkout)."""
    return str(Path(qdevolve.__file__).resolve().parent.parent)


def _stage(agent_code: str, config: dict[str, Any]) -> Path:
    stage = Path(tempfile.mkdtemp(prefix="qdevolve-agent-"))
    os.chmod(stage, 0o755)
    for name, src in _STAGED.items():
        shutil.copyfile(src, stage / name)
    (stage / "agent.py").write_text(agent_code, encoding="utf-8")
    (stage / "config.json").write_text(json.dumps(config, ensure_ascii=False), encoding="utf-8")
    for name in os.listdir(stage):
        os.chmod(stage / name, 0o444)
    return stage


def _keepable(path: str, hidden: list[str]) -> bool:
    real = os.path.realpath(path)
    return not any(real == h or real.startswith(h.rstrip("/") + "/") for h in hidden)


def _local_view(box: Any, hide: list[str]) -> dict | None:
    """What the bootstrap hides and keeps of the host (``local`` with namespaces), else None."""
    if not (box.as_root or box.userns):
        return None
    hidden = [*LOCAL_HIDDEN, os.path.realpath(os.getcwd()), os.path.realpath(tempfile.gettempdir()), *hide]
    hidden = [h for h in dict.fromkeys(hidden)
              if h not in ("/", "/usr") and not h.startswith(("/usr/", "/proc", "/dev", "/sys"))]
    return {"keep": [p for p in box._libs if _keepable(p, hide)], "hide": hidden}


def _bwrap(box: Any, limits: SandboxLimits, env: dict[str, str], stage: Path,
           hide: list[str]) -> list[str]:
    """argv of the ``bwrap`` backend (see the module doc)."""
    caps = ("CAP_SETUID", "CAP_SETGID") if box.as_root else ()
    argv = bwrap_root_head(limits, env, caps)
    if not box.as_root:  # no privileges: every namespace, the user's too
        argv[1:argv.index("--die-with-parent")] = ["--unshare-all", *(["--share-net"] if limits.network else [])]
    size = str(int(limits.tmpfs_mb) * _MIB)
    argv += ["--perms", "1777", "--size", size, "--tmpfs", "/tmp"]
    ro = [p for p in box._ro if not p.startswith("/usr/") and _keepable(p, hide)]
    for d in mount_parents([*ro, _BWRAP_STAGE, _BWRAP_WORK]):
        argv += ["--perms", "0755", "--dir", d]
    for path in ro:
        argv += ["--ro-bind", path, path]
    argv += ["--ro-bind", str(stage), _BWRAP_STAGE,
             "--perms", "1777", "--size", str(int(limits.work_mb) * _MIB), "--tmpfs", _BWRAP_WORK,
             "--proc", "/proc", "--dev", "/dev",
             "--perms", "1777", "--size", size, "--tmpfs", "/dev/shm",
             "--chdir", _BWRAP_WORK,
             "--", box.python, "-I", "-S", f"{_BWRAP_STAGE}/_boot.py", f"{_BWRAP_STAGE}/config.json"]
    return argv


def launch(box: Any, kind: str, agent_code: str, payload: dict[str, Any], budget: AgentBudget,
           hide: list[str]) -> Launched:
    """Start the agent (``payload``: its ``task``, ``parent`` and ``feedback``).

    Raises:
        OSError: the process could not be started.
    """
    limits = agent_limits(budget)
    hide = [os.path.realpath(h) for h in hide]
    req_r, req_w = os.pipe()
    rep_r, rep_w = os.pipe()
    uid = box._acquire_uid() if box.as_root else None
    rlimits = render_rlimits(limits)
    if uid is None:  # RLIMIT_NPROC counts every process of the uid: only for the agent's own
        rlimits.pop("NPROC")
    config = {**payload, "fds": [rep_r, req_w], "rlimits": rlimits, "drop": None if uid is None else [uid, uid],
              "sys_path": [p for p in box.sys_path if _keepable(p, hide)], "tmp_mb": limits.tmpfs_mb,
              "work_mb": limits.work_mb, "view": None}
    stage = memory = None
    try:
        env = render_env(limits)
        if kind == "local":
            config["view"] = _local_view(box, hide)
        stage = _stage(agent_code, config)
        if kind == "bwrap":
            argv = _bwrap(box, limits, env, stage, hide)
        else:
            argv = render_local_argv(box.python, str(stage / "_boot.py"), str(stage / "config.json"),
                                     as_root=box.as_root, limits=limits, userns=box.userns)
            if config["view"] is None:  # the host's /tmp is shared: HOME and temp files in the stage
                env = {**env, "HOME": str(stage), "TMPDIR": str(stage)}
        memory = _cgroup.new_cap(budget.memory_mb, kind="agent")
        if memory is not None:
            argv = memory.wrap(argv)
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                pass_fds=(rep_r, req_w), start_new_session=True, env=env, cwd=str(stage))
    except BaseException:
        for fd in (req_r, req_w, rep_r, rep_w):
            os.close(fd)
        if memory is not None:
            memory.remove()
        if stage is not None:
            shutil.rmtree(stage, ignore_errors=True)
        if uid is not None:
            box._release_uid(uid)
        raise
    os.close(rep_r)
    os.close(req_w)
    os.set_blocking(rep_w, False)
    out = Launched(proc=proc, requests=req_r, replies=rep_w, stage=stage, box=box, uid=uid, memory=memory,
                   shell_style=kind == "bwrap")
    out.reader = threading.Thread(target=_drain, args=(proc.stdout.fileno(), out.tail, out.stop), daemon=True)
    out.reader.start()
    return out


def _drain(fd: int, tail: bytearray, stop: threading.Event) -> None:
    """Keep the last bytes of the agent's output until end of file or ``stop`` (a process
    that escaped every kill may hold the pipe open: the reader never blocks for good)."""
    while not stop.is_set():
        ready, _, _ = select.select([fd], [], [], 0.2)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            return
        if not chunk:
            return
        tail.extend(chunk)
        if len(tail) > 2 * LOG_BYTES:
            del tail[:-LOG_BYTES]


def terminate(run: Launched, *, grace_s: float = 0.0) -> tuple[int | None, int]:
    """Give the agent ``grace_s`` to exit, then kill its whole tree and clean up.

    Returns:
        (the process's exit code, OOM kills seen in its memory cgroup).
    """
    code = None
    try:
        code = run.proc.wait(timeout=grace_s) if grace_s > 0 else run.proc.poll()
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(run.proc.pid, signal.SIGKILL)
    except OSError:
        pass
    if run.uid is not None:
        for _ in range(100):
            pids = uid_processes([run.uid]).get(run.uid, [])
            if not pids:
                break
            kill_all(pids)
            time.sleep(0.02)
    ooms = run.memory.oom_kills() if run.memory is not None else 0
    if run.memory is not None:
        run.memory.remove()
    try:
        waited = run.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        waited = None
    code = code if code is not None else waited
    if run.reader is not None:
        run.reader.join(timeout=1)
        run.stop.set()
        run.reader.join(timeout=1)
    for fd in (run.requests, run.replies):
        try:
            os.close(fd)
        except OSError:
            pass
    if run.proc.stdout is not None and not (run.reader and run.reader.is_alive()):
        run.proc.stdout.close()
    shutil.rmtree(run.stage, ignore_errors=True)
    if run.uid is not None:
        run.box._release_uid(run.uid)
    return code, ooms


def log_tail(run: Launched) -> str:
    """The last :data:`LOG_BYTES` of the agent's output, as text."""
    return bytes(run.tail[-LOG_BYTES:]).decode("utf-8", "replace")
