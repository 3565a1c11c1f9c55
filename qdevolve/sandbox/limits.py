"""`SandboxLimits` and the pure functions that render it into each backend's policy.

Nothing here runs a process: the renderers return argv lists, rlimit tables and Docker
keyword arguments that tests assert on directly (policy as data).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "SandboxLimits",
    "as_limits",
    "DEFAULT_ENV",
    "SANDBOX_ROOT",
    "render_env",
    "render_rlimits",
    "render_local_argv",
    "LOCAL_HIDDEN",
    "render_bwrap_argv",
    "render_bwrap_zygote_argv",
    "render_docker_kwargs",
]

#: Environment every sandbox gets; nothing else is inherited unless named in ``env_allow``.
DEFAULT_ENV: tuple[tuple[str, str], ...] = (
    ("PATH", "/usr/local/bin:/usr/bin:/bin"),
    ("LANG", "C.UTF-8"),
    ("LC_ALL", "C.UTF-8"),
    ("HOME", "/tmp"),
    ("TMPDIR", "/tmp"),
    ("PYTHONDONTWRITEBYTECODE", "1"),
    ("PYTHONHASHSEED", "0"),
    ("OMP_NUM_THREADS", "1"),
    ("OPENBLAS_NUM_THREADS", "1"),
    ("MKL_NUM_THREADS", "1"),
    ("MALLOC_ARENA_MAX", "2"),
)

#: Where the runner, the evaluator and the work directory appear inside bwrap and Docker.
SANDBOX_ROOT = "/qdevolve"

_MIB = 1 << 20


@dataclass(frozen=True, kw_only=True)
class SandboxLimits:
    """Resource limits of one evaluation, rendered by every backend into its own policy.

    Attributes:
        wall_s: Wall-clock limit enforced by the controller (SIGKILL of the whole tree).
        cpu_s: CPU seconds per process (``RLIMIT_CPU`` soft; hard = soft + 1, SIGKILL).
        memory_mb: Address-space limit (``RLIMIT_AS``) and, in Docker, memory = memory+swap.
        processes: ``RLIMIT_NPROC`` for the sandbox uid; Docker ``pids_limit``.
        output_bytes: Bytes of stdout and of stderr kept (the tail); the rest is drained.
        file_size_bytes: ``RLIMIT_FSIZE``: the largest file the program may write.
        open_files: ``RLIMIT_NOFILE``.
        network: Allow network access (off: a private network namespace, loopback only).
        env: Variables set in the sandbox (name, value); see :data:`DEFAULT_ENV`.
        env_allow: Names copied from the controller's environment when set there (allowlist).
        tmpfs_mb: Size of the private ``/tmp`` and of the private ``/dev/shm`` (each).
        work_mb: Disk quota of the per-evaluation work directory (a size-limited tmpfs).
        call_s: Deadline of one call from the evaluator into the candidate process
            (``None``: the wall clock).
        artifacts_bytes: Total UTF-8 bytes of artifacts stored per evaluation (stdout and
            stderr tails included); beyond it values are cut and ``artifacts["truncated"]``
            names them.
    """

    wall_s: float = 30.0
    cpu_s: float = 30.0
    memory_mb: int = 1024
    processes: int = 64
    output_bytes: int = 1 * _MIB
    file_size_bytes: int = 16 * _MIB
    open_files: int = 256
    network: bool = False
    env: tuple[tuple[str, str], ...] = field(default=DEFAULT_ENV)
    env_allow: tuple[str, ...] = ()
    tmpfs_mb: int = 64
    work_mb: int = 256
    call_s: float | None = None
    artifacts_bytes: int = 256 * 1024

    def __post_init__(self) -> None:
        for name in ("wall_s", "cpu_s", "memory_mb", "processes", "output_bytes",
                     "file_size_bytes", "open_files", "tmpfs_mb", "work_mb", "artifacts_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"SandboxLimits.{name} must be a positive number, got {value!r}")
        if self.call_s is not None and (isinstance(self.call_s, bool) or not isinstance(self.call_s, (int, float))
                                        or not self.call_s > 0):
            raise ValueError(f"SandboxLimits.call_s must be a positive number or None, got {self.call_s!r}")
        object.__setattr__(self, "env", tuple((str(k), str(v)) for k, v in dict(self.env).items()))
        object.__setattr__(self, "env_allow", tuple(self.env_allow))

    def replace(self, **changes: Any) -> SandboxLimits:
        """A copy with some fields changed."""
        from dataclasses import replace

        return replace(self, **changes)


def as_limits(value: SandboxLimits | dict[str, Any] | None) -> SandboxLimits | None:
    """Accept limits as a :class:`SandboxLimits` or a mapping of its fields (YAML configs).

    Raises:
        ValueError: an unknown field, naming the fields that exist.
    """
    if value is None or isinstance(value, SandboxLimits):
        return value
    if isinstance(value, dict):
        from dataclasses import fields

        known = {f.name for f in fields(SandboxLimits)}
        unknown = sorted(set(value) - known)
        if unknown:
            raise ValueError(f"unknown sandbox limit(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        return SandboxLimits(**value)
    raise ValueError(f"sandbox limits must be a SandboxLimits or a mapping, got {type(value).__name__}")


def render_env(limits: SandboxLimits, host_env: dict[str, str] | None = None,
               sys_path: list[str] | None = None) -> dict[str, str]:
    """The sandbox environment: :data:`DEFAULT_ENV`-style pairs plus allowlisted host names.

    ``sys_path`` (the library directories the runner appends) becomes ``PYTHONPATH``, so an
    evaluator that runs ``[sys.executable, program]`` gets an interpreter that imports what
    the runner can (numpy & co.).
    """
    host_env = os.environ if host_env is None else host_env
    env = dict(limits.env)
    if sys_path and "PYTHONPATH" not in env:
        env["PYTHONPATH"] = os.pathsep.join(sys_path)
    for name in limits.env_allow:
        if name in host_env:
            env[name] = host_env[name]
    return env


def render_rlimits(limits: SandboxLimits) -> dict[str, tuple[int, int]]:
    """Rlimits the runner applies to itself before loading the evaluator (name -> soft, hard).

    CPU: soft = ``ceil(cpu_s)`` (SIGXCPU, catchable), hard = soft + 1 (SIGKILL).
    """
    cpu = max(1, int(-(-limits.cpu_s // 1)))
    mem = int(limits.memory_mb) * _MIB
    return {
        "AS": (mem, mem),
        "CPU": (cpu, cpu + 1),
        "NPROC": (int(limits.processes), int(limits.processes)),
        "FSIZE": (int(limits.file_size_bytes), int(limits.file_size_bytes)),
        "NOFILE": (int(limits.open_files), int(limits.open_files)),
        "CORE": (0, 0),
    }


#: Directories the ``local`` backend covers with an empty tmpfs in its mount namespace (host
#: UNIX sockets live under /run, other users' and runs' files under the rest); the project
#: directory (the controller's working directory) is added at run time.
LOCAL_HIDDEN = ("/tmp", "/var/tmp", "/run", "/home", "/root", "/mnt", "/media", "/srv", "/opt")


def render_local_argv(
    python: str, runner: str, run_file: str, *, as_root: bool, limits: SandboxLimits,
    userns: bool = False,
) -> list[str]:
    """argv of the ``local`` backend.

    As root: ``unshare`` new pid/mount (fresh ``/proc``)/ipc/uts (and net unless
    ``limits.network``) namespaces with ``--kill-child``; the runner, pid 1 there, builds
    its view of the host with ``mount(2)`` (``_mountview.py``) and then drops to the
    sandbox uid itself (the run file names it). As a normal user with working user
    namespaces (``userns``) the same namespaces are made under ``unshare --map-root-user``;
    otherwise the bare interpreter.
    """
    py = [python, "-I", "-S", runner, run_file]
    ns = ["--pid", "--fork", "--kill-child", "--mount-proc", "--ipc", "--uts"]
    if not limits.network:
        ns.append("--net")
    if as_root:
        return ["unshare", *ns, "--", *py]
    if userns:
        return ["unshare", "--map-root-user", *ns, "--", *py]
    return py


def render_bwrap_argv(
    python: str, runner_dir: str, workdir: str, *, uid: int | None, gid: int | None,
    limits: SandboxLimits, env: dict[str, str], ro_paths: list[str], evaluator: str | None,
) -> list[str]:
    """argv of the ``bwrap`` backend: ``setpriv`` (when root) then ``bwrap ... python -I -S``.

    The sandbox sees read-only ``/usr`` (and the ``/lib*``, ``/bin``, ``/sbin`` links or
    directories), the interpreter and ``ro_paths`` read-only at their own paths, the runner at
    ``/qdevolve/runner``, the evaluator at ``/qdevolve/evaluator/<name>``, the per-run work
    directory read-write at ``/qdevolve/work``, a private tmpfs ``/tmp``, fresh ``/proc`` and
    a minimal ``/dev``. Every namespace is unshared (network too unless ``limits.network``).
    """
    argv: list[str] = []
    if uid is not None:
        argv += ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
                 "--inh-caps=-all", "--"]
    argv += ["bwrap", "--unshare-all"]
    if limits.network:
        argv.append("--share-net")
    # --as-pid-1: the trusted runner is the namespace's init, so no process of the
    # candidate can signal it (signals an init has no handler for are dropped)
    argv += ["--die-with-parent", "--new-session", "--as-pid-1", "--clearenv", "--cap-drop", "ALL"]
    for name, value in env.items():
        argv += ["--setenv", name, value]
    argv += _bwrap_system()
    # The private /tmp first: interpreter or site-packages paths under /tmp (a checkout or
    # venv there) are bound on top of it below instead of being hidden by it.
    argv += ["--size", str(int(limits.tmpfs_mb) * _MIB), "--tmpfs", "/tmp"]
    for path in ro_paths:
        if not path.startswith("/usr/"):
            argv += ["--ro-bind", path, path]
    argv += ["--ro-bind", runner_dir, f"{SANDBOX_ROOT}/runner"]
    if evaluator:
        argv += ["--ro-bind", evaluator, f"{SANDBOX_ROOT}/evaluator/{os.path.basename(evaluator)}"]
    # the work dir is a size-limited tmpfs (the disk quota); the program and the run file
    # are bound into it read-only, so the candidate can neither rewrite the program the
    # evaluator reads nor fill the host's disk
    work = f"{SANDBOX_ROOT}/work"
    argv += ["--size", str(int(limits.work_mb) * _MIB), "--tmpfs", work]
    try:  # program.<ext> of the program's language, as staged
        programs = sorted(n for n in os.listdir(workdir) if n.startswith("program.")) or ["program.py"]
    except OSError:
        programs = ["program.py"]
    for name in (*programs, ".qdevolve-run"):  # program.<ext> of the program's language
        argv += ["--ro-bind", f"{workdir}/{name}", f"{work}/{name}"]
    argv += [
        "--proc", "/proc", "--dev", "/dev",
        "--size", str(int(limits.tmpfs_mb) * _MIB), "--tmpfs", "/dev/shm",
        "--chdir", work,
        "--", python, "-I", "-S", f"{SANDBOX_ROOT}/runner/runner.py",
        f"{work}/.qdevolve-run",
    ]
    return argv


def _bwrap_system() -> list[str]:
    argv = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    return argv


#: What the warm bwrap template keeps of root's capabilities (and only while it is root):
#: mounts and new namespaces per evaluation, and the switch to the evaluation's uid.
BWRAP_ZYGOTE_CAPS = ("CAP_SYS_ADMIN", "CAP_SETUID", "CAP_SETGID", "CAP_KILL")


def bwrap_root_head(limits: SandboxLimits, env: dict[str, str], caps: Sequence[str]) -> list[str]:
    """The start of a ``bwrap`` argv run as root: new ipc, pid, uts, cgroup and (unless
    ``limits.network``) network namespaces, no user namespace, every capability dropped but
    ``caps``, a clean environment of ``env`` and the read-only system directories."""
    argv = ["bwrap", "--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try"]
    if not limits.network:
        argv.append("--unshare-net")
    argv += ["--die-with-parent", "--new-session", "--as-pid-1", "--clearenv", "--cap-drop", "ALL"]
    for cap in caps:
        argv += ["--cap-add", cap]
    for name, value in env.items():
        argv += ["--setenv", name, value]
    return argv + _bwrap_system()


def mount_parents(paths: Sequence[str]) -> list[str]:
    """Every directory above ``paths``, outermost first (``bwrap`` as root makes a mount
    point's missing parents 0700, so they are made 0755 for the evaluation's uids)."""
    out: list[str] = []
    for path in paths:
        up, chain = os.path.dirname(path), []
        while up not in ("/", "/tmp", ""):
            chain.append(up)
            up = os.path.dirname(up)
        out += [d for d in reversed(chain) if d not in out]
    return out


def render_bwrap_zygote_argv(
    python: str, runner_dir: str, eval_dir: str, *, limits: SandboxLimits, env: dict[str, str],
    ro_paths: list[str],
) -> list[str]:
    """argv of the warm ``bwrap`` template (run as root; ``zygote.py`` appends its arguments).

    The same view as :func:`render_bwrap_argv` (read-only ``/usr``, interpreter and
    ``ro_paths``; the runner at ``/qdevolve/runner``; private ``/tmp``, ``/dev/shm``,
    ``/proc``, ``/dev``; new ipc, pid, uts, cgroup and, unless ``limits.network``, network
    namespaces) with the staged evaluators read-only at ``/qdevolve/evaluators`` and an empty
    ``/qdevolve/work``. Every capability is dropped except :data:`BWRAP_ZYGOTE_CAPS`: the
    template mounts a fresh ``/tmp``, ``/dev/shm`` and work dir in new mount, pid and ipc
    namespaces per evaluation and switches to its uid, which clears them for good.
    """
    argv = bwrap_root_head(limits, env, BWRAP_ZYGOTE_CAPS)
    argv += ["--size", str(int(limits.tmpfs_mb) * _MIB), "--tmpfs", "/tmp"]
    # bwrap as root makes the mount points' parents 0700: the evaluation's uid must walk them
    for d in mount_parents([p for p in ro_paths if not p.startswith("/usr/")] + [f"{SANDBOX_ROOT}/runner"]):
        argv += ["--perms", "0755", "--dir", d]
    for path in ro_paths:
        if not path.startswith("/usr/"):
            argv += ["--ro-bind", path, path]
    argv += ["--ro-bind", runner_dir, f"{SANDBOX_ROOT}/runner",
             "--ro-bind", eval_dir, f"{SANDBOX_ROOT}/evaluators",
             "--dir", f"{SANDBOX_ROOT}/work",
             "--proc", "/proc", "--dev", "/dev",
             "--size", str(int(limits.tmpfs_mb) * _MIB), "--tmpfs", "/dev/shm",
             "--chdir", "/",
             "--", python, "-I", "-S", f"{SANDBOX_ROOT}/runner/zygote.py"]
    return argv


def render_docker_kwargs(
    limits: SandboxLimits, *, image: str, user: str, env: dict[str, str],
    mounts: dict[str, tuple[str, str]], name: str | None = None, command: list[str] | None = None,
    runtime: str | None = None, work_owner: int | None = None, cap_add: list[str] | None = None,
    root_init: bool = False, cpu_backstop: bool = True,
) -> dict[str, Any]:
    """Keyword arguments of ``docker.containers.create`` (docker SDK 7).

    Network ``none``, memory = memory+swap, ``pids_limit``, one CPU, read-only root with
    tmpfs ``/tmp``, every capability dropped, ``no-new-privileges``, a non-root ``user``,
    ``init``, logging ``none`` (output is read, capped, from the exec stream) and ulimits for
    CPU seconds, file size, open files and core dumps. ``mounts`` maps host path ->
    (container path, ``ro``/``rw``). ``root_init``: the container starts as root (with only
    ``cap_add`` in its bounding set) so that an exec as root holds those capabilities; its
    ``command`` must drop to ``user`` itself (``docker_backend``'s idle process does).
    ``cpu_backstop=False`` (a warm container, which serves evaluations of any ``cpu_s``):
    no container-wide CPU ulimit; each evaluation's runner sets its own and the
    candidate's (an rlimit can be lowered but never raised again without privileges).
    """
    uid = user.split(":", 1)[0]
    if uid in ("0", "root", ""):
        raise ValueError("the docker sandbox refuses to run as root; give a non-zero uid:gid")
    rl = render_rlimits(limits)
    kwargs: dict[str, Any] = {
        "image": image,
        "command": command,
        "user": "0:0" if root_init else user,
        "environment": dict(env),
        "network_mode": "bridge" if limits.network else "none",
        "mem_limit": f"{int(limits.memory_mb)}m",
        "memswap_limit": f"{int(limits.memory_mb)}m",
        "pids_limit": int(limits.processes),
        "nano_cpus": 1_000_000_000,
        "read_only": True,
        "tmpfs": {"/tmp": f"rw,nosuid,nodev,size={int(limits.tmpfs_mb)}m",
                  "/dev/shm": f"rw,nosuid,nodev,noexec,size={int(limits.tmpfs_mb)}m",
                  # the work dir: a size-limited tmpfs (the disk quota); the program arrives
                  # read-only under /qdevolve/in and the runner copies it here
                  # root's and sticky when the runner starts as root (docker_backend): the
                  # candidate adds files but cannot rewrite or remove the program
                  f"{SANDBOX_ROOT}/work": f"rw,nosuid,nodev,size={int(limits.work_mb)}m,uid={work_owner if work_owner is not None else uid},mode={'1777' if work_owner == 0 else '0700'}"},
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges:true"],
        "init": True,
        "log_config": {"type": "none", "config": {}},
        "ulimits": [
            # a backstop past the runner's own CPU limit, which lasts the wall clock
            {"name": "cpu", "soft": max(rl["CPU"][0], int(limits.wall_s) + 3) + 1 if cpu_backstop else -1,
             "hard": max(rl["CPU"][1], int(limits.wall_s) + 4) + 1 if cpu_backstop else -1},
            {"name": "fsize", "soft": rl["FSIZE"][0], "hard": rl["FSIZE"][1]},
            {"name": "nofile", "soft": rl["NOFILE"][0], "hard": rl["NOFILE"][1]},
            {"name": "core", "soft": 0, "hard": 0},
        ],
        "volumes": {host: {"bind": target, "mode": mode} for host, (target, mode) in mounts.items()},
        "working_dir": "/",
        "labels": {"qdevolve.sandbox": "1"},
        "detach": True,
        "stdin_open": False,
        "tty": False,
    }
    if cap_add:
        kwargs["cap_add"] = list(cap_add)
    if name:
        kwargs["name"] = name
    if runtime:
        kwargs["runtime"] = runtime
    return kwargs
