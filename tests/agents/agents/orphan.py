"""Starts a detached grandchild (new session, double fork) that outlives it, then returns."""
import os
import sys


def propose(task, parent, feedback, tools):
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", feedback["token"]])
        os._exit(0)
    os.waitpid(pid, 0)
    return parent
