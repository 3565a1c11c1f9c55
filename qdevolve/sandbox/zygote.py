"""The warm template of the ``local`` and ``bwrap`` sandboxes: one pre-imported process per
worker.

Started once per worker (staged next to ``runner.py``; stdlib only) as ``unshare
<namespaces> -- python -I -S zygote.py FD VIEW TMP_MB`` (``local``: as namespace root and
pid 1 it builds the view of the host once, ``_mountview``) or inside bubblewrap as root with
only ``CAP_SYS_ADMIN``, ``CAP_SETUID`` and ``CAP_SETGID`` (``bwrap``: bubblewrap built the
view). It imports everything an evaluation needs, and then, for each
job the controller sends on ``FD`` (a ``SOCK_SEQPACKET`` socket: four passed descriptors,
a memory file holding the job as ``marshal``, the record pipe, the stderr pipe and the nonce
pipe), forks; the template never reads a job (only J does, after the fork), so no program
text or other data of a job is ever in the memory the next job's processes inherit:

* **J** unshares new mount, pid and ipc namespaces, mounts a fresh size-limited ``/tmp``
  (``local``: every directory the view hides, ``/var/tmp``, ``/run``, homes...),
  ``/dev/shm`` and work dir (the program inside, root's, read-only, sticky dir), forks R and
  exits like it;
* **R** (pid 1 of the new pid namespace, fresh ``/proc``) sets the rlimits, forks the
  candidate C from this clean state under the candidate's uid (no groups), drops to the
  runner's uid and group keeping only ``CAP_KILL``, makes itself non-dumpable, and only then
  reads the nonce and imports the evaluator (whose directory only the runner's group reads);
  it is the trusted runner from there on (``runner.finish``).

Nothing of one evaluation survives into the next: each has its own processes (the pid
namespace dies with R), memory (a fork of the template, which never held a job), ``/tmp``, ``/dev/shm``
and work dir. The zygote reports ``("done", exit status)`` for each job.
"""

from __future__ import annotations

import ctypes
import marshal
import os
import socket
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _mountview  # noqa: E402
import _procctl  # noqa: E402
import _standin  # noqa: E402,F401 - pre-imported for the jobs
import _wire  # noqa: E402,F401
import candidate  # noqa: E402,F401
import runner  # noqa: E402

CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWIPC = 0x00020000, 0x20000000, 0x08000000
_libc = ctypes.CDLL(None, use_errno=True)


def _job(job: dict, rec: int, err: int, nonce_fd: int) -> None:
    """J: fresh namespaces and file systems, then R (see the module doc)."""
    try:  # the job's tree, not the template, is what the out-of-memory killer picks
        with open("/proc/self/oom_score_adj", "w") as fh:
            fh.write("1000")
    except OSError:
        pass
    if _libc.unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC) != 0:  # ipc: no SysV leftovers
        os._exit(126)
    # paths the template sees under /tmp (``local``: the staged evaluators) are bound back
    keep = [(os.open(p, os.O_PATH), p, os.path.isdir(p)) for p in job["rebind"] if os.path.exists(p)]
    for path in job.get("fresh", ["/tmp"]):  # local: every hidden dir, not only /tmp
        if os.path.isdir(path) and not os.path.islink(path):
            _mountview._tmpfs(path, job["tmp_mb"])
    _mountview.bind_back(keep)
    for path in job.get("hide", []):  # the evaluator's own directory on the host
        if os.path.isdir(path) and not os.path.islink(path):
            _mountview._tmpfs(path, 1, "0755")
    _mountview._tmpfs("/dev/shm", job["tmp_mb"])
    work = job["work"]
    os.makedirs(work, exist_ok=True)
    _mountview._tmpfs(work, job["work_mb"])
    program = os.path.join(work, job["program_name"])
    with open(program, "wb") as fh:
        fh.write(job["program_source"])
    os.chmod(program, 0o444)
    pid = os.fork()
    if pid:
        os.close(rec)
        os.close(err)
        os.close(nonce_fd)
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        os._exit(code if code >= 0 else 128 - code)
    try:
        _runner(job, program, rec, err, nonce_fd)
    except BaseException as exc:  # noqa: BLE001 - the set-up failed: say why on stderr
        try:
            os.write(2, f"warm sandbox set-up failed: {type(exc).__name__}: {exc}\n".encode())
        except OSError:
            pass
    finally:
        os._exit(125)


def _runner(job: dict, program: str, rec: int, err: int, nonce_fd: int) -> None:
    """R: pid 1 of the job's pid namespace; becomes the trusted runner."""
    _mountview._mount("proc", "/proc", "proc", _mountview.MS_NOSUID | _mountview.MS_NODEV | 8)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(rec, 1)
    os.dup2(err, 2)
    for fd in (devnull, rec, err):
        os.close(fd)
    users = job.get("users")
    _procctl.no_new_privs()
    own, cand_cpu = _procctl.split_cpu({k: tuple(v) for k, v in job["rlimits"].items()}, float(job["run_s"]))
    _procctl.set_rlimits(own)
    os.environ.clear()
    os.environ.update(job["env"])
    work = job["work"]
    for key in ("HOME", "TMPDIR"):  # as in a cold run of ``local``: in the work dir
        if job.get("home_work") and os.environ.get(key) == "/tmp":
            os.environ[key] = work
    channel = os.dup(1)
    drain = _standin.Drain(int(job["output_bytes"]))
    os.chdir(work)
    here = os.path.dirname(os.path.abspath(__file__))
    cand = _standin.Candidate(sys.executable, os.path.join(here, "candidate.py"), list(job["sys_path"]),
                              float(job["call_s"]), float(job["cpu_s"]), float(job["run_s"]), fork_only=True,
                              cpu_rlimit=cand_cpu, user=None if users is None else tuple(users["candidate"]))
    os.set_inheritable(nonce_fd, False)
    cand.start()  # forked now: the candidate never holds the nonce or the evaluator
    if users is not None:
        _procctl.drop_keeping_kill(*users["runner"])
    _procctl.nondumpable()
    nonce = os.read(nonce_fd, 256).decode("ascii", "replace")
    os.close(nonce_fd)
    cfg = {"program": program, "evaluator": job["evaluator"], "cascade": job["cascade"]}
    runner.finish(cfg, nonce, channel, drain, cand)


def _read_job(fd: int) -> dict:
    """J's first act: the job, read from the descriptor the template passed on unread."""
    size = os.fstat(fd).st_size
    data = os.pread(fd, size, 0)
    os.close(fd)
    return marshal.loads(data)


def main(argv: list) -> None:
    _procctl.nondumpable()
    runner.preimport()
    sock = socket.socket(fileno=int(argv[1]))
    view = marshal.loads(bytes.fromhex(argv[2]))
    if view.get("hide") is not None:  # local: hide the host (bwrap built its view already)
        _mountview.build_view(view, int(argv[3]))
    else:  # what the jobs mount stays in their own namespaces
        _mountview._mount(None, "/", None, _mountview.MS_REC | _mountview.MS_PRIVATE)
    for p in view.get("sys_path", []):
        sys.path.append(p)
    import importlib.util  # noqa: F401 - what evaluators import first
    import resource  # noqa: F401 - the runner's rlimits and rusage (a fresh import costs ms)
    import runpy  # noqa: F401
    import threading  # noqa: F401 - the output drain

    sock.send(marshal.dumps(("ready",)))
    while True:
        try:  # the job itself stays in its descriptor: this process never reads a job's data
            msg, fds, _flags, _addr = socket.recv_fds(sock, 16, 4)
        except OSError:
            break
        if msg != b"job" or len(fds) != 4:
            break
        pid = os.fork()
        if pid == 0:
            sock.close()
            try:
                _job(_read_job(fds[0]), *fds[1:])
            finally:
                os._exit(124)
        for fd in fds:
            os.close(fd)
        while True:  # pid 1 here: reap everything, report the job's own status
            done, status = os.waitpid(-1, 0)
            if done == pid:
                break
        code = os.waitstatus_to_exitcode(status)
        sock.send(marshal.dumps(("done", code if code >= 0 else 128 - code)))
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv)
