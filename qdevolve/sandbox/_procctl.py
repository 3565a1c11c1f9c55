"""Process control of the trusted runner inside the sandbox: rlimits, privileges, cleanup.

Staged next to ``runner.py`` (stdlib + ctypes only; imported there as a top-level module):
the rlimits the runner and the candidate get (:func:`split_cpu`), making the runner
non-dumpable, ``no_new_privs``, docker's switch to the runner's uid keeping ``CAP_KILL``,
and what a warm container kills (:func:`reap`) and empties (:func:`wipe`) between
evaluations.
"""

from __future__ import annotations

import os


def set_rlimits(limits: dict) -> None:
    import resource

    for name, (soft, hard) in limits.items():
        res = getattr(resource, "RLIMIT_" + name)
        cur_soft, cur_hard = resource.getrlimit(res)
        if cur_hard != resource.RLIM_INFINITY:
            hard = min(hard, cur_hard)
            soft = min(soft, hard)
        try:
            resource.setrlimit(res, (soft, hard))
        except (ValueError, OSError):
            resource.setrlimit(res, (min(soft, cur_hard), cur_hard))


def split_cpu(rlimits: dict, run_s: float) -> tuple:
    """(the runner's rlimits, the candidate's ``RLIMIT_CPU``): the candidate gets the CPU
    limit; the runner's own lasts past the run's clock (``run_s``), so a candidate that makes
    it drain a flood of output cannot kill it before it writes the record."""
    own = dict(rlimits)
    cpu = tuple(rlimits.get("CPU", (0, 0)))
    if "CPU" in rlimits:
        floor = int(run_s) + 3
        own["CPU"] = (max(cpu[0], floor), max(cpu[1], floor + 1))
    return own, (cpu if "CPU" in rlimits else None)


def _uid_of(pid: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("Uid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def reap(keep: set, uids: set | None = None) -> None:
    """Kill every process of this pid namespace except ``keep`` (docker warm mode); only
    those whose real uid is in ``uids`` when given."""
    import signal

    me = os.getpid()
    for _ in range(50):
        found = False
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) not in keep and int(entry) != me and (
                    uids is None or _uid_of(entry) in uids):
                try:
                    os.kill(int(entry), signal.SIGKILL)
                    found = True
                except OSError:
                    pass
        if not found:
            return


def wipe(paths: list, users: list = ()) -> list:
    """Empty the directories ``paths`` (docker warm mode); the entries left, if any.

    Files go with ``unlink`` (this process owns the sticky directories). Directories go
    with ``chmod -R u+rwx`` and ``rm -rf`` run as each of ``users`` (the candidate's and the
    runner's uids own what they made; fd-based, no depth limit), then ``rm -rf`` as this
    process. No helper process is
    started when only files were left, the usual case.
    """
    import stat
    import subprocess

    def entries() -> list:
        out = []
        for path in paths:
            try:
                out += [os.path.join(path, name) for name in os.listdir(path)]
            except OSError:
                pass
        return out

    dirs = []
    for entry in entries():
        try:
            if stat.S_ISDIR(os.lstat(entry).st_mode):
                dirs.append(entry)
            else:
                os.unlink(entry)
        except OSError:
            dirs.append(entry)
    steps = []
    if dirs:
        for user in users:
            steps += [(["chmod", "-R", "u+rwx", "--"], user), (["rm", "-rf", "--one-file-system", "--"], user)]
        steps.append((["rm", "-rf", "--one-file-system", "--"], None))
    for argv, as_user in steps:
        extra = {} if as_user is None else {"user": as_user[0], "group": as_user[1], "extra_groups": []}
        try:
            subprocess.run(argv + dirs, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=30, **extra)
        except Exception:  # noqa: BLE001 - cleanup never raises; what is left is reported
            pass
    return entries()


def nondumpable() -> None:
    """``prctl(PR_SET_DUMPABLE, 0)``: no process of the same uid may ptrace this one or
    open its ``/proc/<pid>/mem``, ``fd``, ``environ`` (the candidate shares the uid)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE = 4
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def drop_keeping_kill(uid: int, gid: int) -> None:
    """Become ``uid:gid`` with ``CAP_KILL`` as the only capability left (docker: the runner
    must still stop the candidate, which runs under a uid of its own)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(8, 1, 0, 0, 0)  # PR_SET_KEEPCAPS: permitted capabilities survive the switch
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    kill = 1 << 5  # CAP_KILL: effective, permitted; nothing inheritable
    if libc.capset(header, (ctypes.c_uint32 * 6)(kill, kill, 0, 0, 0, 0)) != 0:
        raise OSError(ctypes.get_errno(), "capset(CAP_KILL) failed")
    libc.prctl(8, 0, 0, 0, 0)


def no_new_privs() -> None:
    """``prctl(PR_SET_NO_NEW_PRIVS, 1)``: no exec (a setuid binary, file capabilities) gives
    this process or its children more privileges than they hold."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS = 38
