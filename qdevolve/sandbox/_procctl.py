"""Process control of the trusted runner inside the sandbox: rlimits, privileges, cleanup.

Staged next to ``runner.py`` (stdlib + ctypes only; imported there as a top-level module):
the rlimits the runner and the candidate get (:func:`split_cpu`), making the runner
non-dumpable, ``no_new_privs``, docker's switch to the runner's uid keeping ``CAP_KILL``,
and what a warm container kills (:func:`reap`) and empties (:func:`wipe`,
:func:`clear_ipc`) between evaluations.
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


_IPC = {"shm": "shmid", "msg": "msqid", "sem": "semid"}


def _ipc_objects() -> list:
    """``(kind, id, owner uid, creator uid)`` of every SysV IPC object of this namespace."""
    out = []
    for kind, id_col in _IPC.items():
        try:
            with open(f"/proc/sysvipc/{kind}") as fh:
                header = fh.readline().split()
                for line in fh:
                    row = dict(zip(header, line.split(), strict=False))
                    out.append((kind, int(row[id_col]), int(row["uid"]), int(row["cuid"])))
        except (OSError, KeyError, ValueError):
            continue
    return out


def _queues() -> list:
    try:
        return [os.path.join("/dev/mqueue", n) for n in os.listdir("/dev/mqueue")]
    except OSError:
        return []


def clear_ipc(users: list) -> list:
    """Remove every SysV shared memory segment, message queue and semaphore set and every
    POSIX message queue (``/dev/mqueue``) of this IPC namespace (docker warm mode: the
    container's namespace outlives an evaluation); what is left, if any.

    Each of ``users`` removes what it owns, in a child switched to that uid (the runner holds
    no ``CAP_SYS_ADMIN`` or ``CAP_IPC_OWNER``). No child is forked when nothing is there."""
    if not _ipc_objects() and not _queues():
        return []
    import ctypes

    for uid, gid in users:
        pid = os.fork()
        if pid == 0:
            try:
                os.setgroups([])
                os.setresgid(gid, gid, gid)
                os.setresuid(uid, uid, uid)
                libc = ctypes.CDLL(None, use_errno=True)
                for kind, ident, owner, creator in _ipc_objects():
                    if uid in (owner, creator):
                        if kind == "shm":
                            libc.shmctl(ident, 0, None)  # IPC_RMID
                        elif kind == "msg":
                            libc.msgctl(ident, 0, None)
                        else:
                            libc.semctl(ident, 0, 0)
                for path in _queues():
                    try:
                        if os.lstat(path).st_uid == uid:
                            os.unlink(path)
                    except OSError:
                        pass
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
    return [f"{k} {i}" for k, i, _, _ in _ipc_objects()] + _queues()


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
