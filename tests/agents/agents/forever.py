"""Spins forever after starting a helper process that also spins (marked by a token)."""
import subprocess
import sys


def propose(task, parent, feedback, tools):
    subprocess.Popen([sys.executable, "-c", "while True: pass", feedback["token"]])
    while True:
        pass
