"""Starts a detached grandchild (new session, double fork) that outlives it, then returns
once the grandchild runs under its token (so the test's check cannot race its exec)."""
import os
import sys
import time


def _running(token):
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if token.encode() in fh.read() and int(pid) != os.getpid():
                    return True
        except (OSError, ValueError):
            continue
    return False


def propose(task, parent, feedback, tools):
    token = feedback["token"]
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", token])
        os._exit(0)
    os.waitpid(pid, 0)
    deadline = time.monotonic() + 10
    while not _running(token) and time.monotonic() < deadline:
        time.sleep(0.02)
    return parent + "\n# " + ("running" if _running(token) else "not started")
