"""Kill a real process at a chosen write: the shared part of the unit-of-work kill tests.

A script is :data:`PRELUDE` followed by the test's own body. The prelude reads the kill point
from ``QDEVOLVE_KILL_AT`` (``where:k``) and wraps the store so that, while the body has set
``st["window"]``, it counts committed transactions (``st["commits"]``) and non-empty row
inserts (``st["inserts"]``) and SIGKILLs the process:

* ``after:k`` - right after the k-th transaction of the window committed;
* ``in:k`` - inside a transaction, right after the k-th table's rows.

``end_window()`` closes the window; with ``count`` it prints ``commits N inserts M`` (what a
kill test then iterates over) and dies. Any other ``where`` (``none``, or one the body checks
itself) kills nothing here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

__all__ = ["PRELUDE", "run_script"]

ROOT = Path(__file__).resolve().parents[2]

PRELUDE = r'''
import os, signal, sys
from qdevolve.db.store import LineageStore

where, _, k = os.environ["QDEVOLVE_KILL_AT"].partition(":")
k = int(k or 0)
st = {"window": False, "commits": 0, "inserts": 0}
_orig_begin, _orig_insert = LineageStore._begin, LineageStore._insert


def die():
    os.kill(os.getpid(), signal.SIGKILL)


class _Begin:
    def __init__(self, cm):
        self.cm = cm

    def __enter__(self):
        return self.cm.__enter__()

    def __exit__(self, *exc):
        out = self.cm.__exit__(*exc)
        if st["window"] and exc[0] is None:
            st["commits"] += 1
            if where == "after" and st["commits"] == k:
                die()  # this transaction committed; whatever is written next has not
        return out


def _begin(self):
    return _Begin(_orig_begin(self))


def _insert(self, c, mapper, items, ctx):
    _orig_insert(self, c, mapper, items, ctx)
    if st["window"] and items:
        st["inserts"] += 1
        if where == "in" and st["inserts"] == k:
            die()  # inside the open transaction, after this table's rows


def end_window():
    """The window closes (e.g. at the engine's next plan); ``count`` prints what it saw and dies."""
    if st["window"]:
        st["window"] = False
        if where == "count":
            print("commits", st["commits"], "inserts", st["inserts"], flush=True)
            die()


LineageStore._begin, LineageStore._insert = _begin, _insert
'''


def run_script(path: Path, body: str, args: list[str], point: str, *,
               timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """Write :data:`PRELUDE` + ``body`` to ``path`` and run it with ``args``, killing at ``point``."""
    path.write_text(PRELUDE + body)
    env = {**os.environ, "QDEVOLVE_KILL_AT": point,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, str(path), *args], env=env, capture_output=True, text=True,
                          timeout=timeout)
