"""Programs and evaluators of the catalogue's isolation attacks of issue 19.

What crosses the wire (``lying_values``: an object whose ``len``/``iter``/``[]`` disagree,
run against a tour-length evaluator; ``pointer_array``: an object whose
``__array_interface__`` points into memory, against an evaluator that calls
``numpy.asarray`` on it), warm persistence (``warm_persistence``: files in every writable
directory, SysV and POSIX IPC objects written by one evaluation and looked for in the next)
and memory across a process tree (``memory_tree``). :mod:`qdevolve.sandbox.attacks` turns
them into :class:`~qdevolve.sandbox.attacks.Attack` entries.
"""

from __future__ import annotations

__all__ = ["LYING_VALUES", "MEMORY_TREE", "PERSIST", "POINTER_ARRAY", "TOUR_EVALUATOR",
           "WEIGHTS_EVALUATOR", "honest_tour_score"]

TOUR_EVALUATOR = """
import importlib.util, math

N = 12
CITIES = [(math.cos(2 * math.pi * i / N) * (1 + i % 3), math.sin(2 * math.pi * i / N) * (1 + i % 3))
          for i in range(N)]


def tour_length(tour):
    return sum(math.dist(CITIES[tour[i]], CITIES[tour[(i + 1) % N]]) for i in range(N))


def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("candidate_program", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tour = module.solve(CITIES)
    if len(tour) != N or sorted(tour) != list(range(N)) or len(set(tour)) != N:
        return {"combined_score": -1e9, "artifacts": {"validation": "not a tour"}}
    return {"combined_score": -tour_length(tour)}
"""



def honest_tour_score() -> float:
    names: dict = {}
    exec(TOUR_EVALUATOR, names)  # noqa: S102 - our own constant: the honest tour's score
    return -names["tour_length"](list(range(names["N"])))


WEIGHTS_EVALUATOR = """
import importlib.util
import numpy as np


def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("candidate_program", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    w = np.asarray(module.weights(), dtype=np.float64)
    if w.shape != (16,):
        return {"combined_score": 0.0, "artifacts": {"validation": "wrong shape"}}
    return {"combined_score": float(np.sort(np.nan_to_num(w))[-1])}
"""

PERSIST = """
import ctypes, os, sys

tag = "qdevolve-persist-" + os.path.basename("__HOSTDIR__")
dirs = ["/tmp", "/var/tmp", "/dev/shm", "/run", "/run/lock", "/home", "/root", "/opt", "/srv", "/mnt",
        "/media", os.getcwd(), os.path.expanduser("~"), os.environ.get("TMPDIR", "/tmp")]
found = []
for d in dirs:
    try:
        if tag in os.listdir(d):
            found.append(d)
    except OSError:
        pass
libc = ctypes.CDLL(None, use_errno=True)
key = 0x51440000 + sum(tag.encode()) % 0xFFFF
if libc.shmget(key, 4096, 0) >= 0:
    found.append("SysV shared memory")
if libc.msgget(key, 0) >= 0:
    found.append("SysV message queue")
try:
    rt = ctypes.CDLL("librt.so.1", use_errno=True)
    if rt.mq_open(("/" + tag).encode(), 0) >= 0:
        found.append("POSIX message queue")
except OSError:
    rt = None
for d in dirs:
    try:
        with open(os.path.join(d, tag), "w") as fh:
            fh.write("left by an earlier evaluation")
    except OSError:
        pass
libc.shmget(key, 4096, 0o1600)
libc.msgget(key, 0o1600)
if rt is not None:
    rt.mq_open(("/" + tag).encode(), 0o100, 0o600, None)
if found:
    sys.exit("state of an earlier evaluation survived: " + ", ".join(dict.fromkeys(found)))
"""

LYING_VALUES = """
class Tour:  # iterates as a permutation, indexes as one city: a zero-length "tour"
    def __len__(self):
        return 12
    def __iter__(self):
        return iter(range(12))
    def __getitem__(self, i):
        return 0
    def __contains__(self, x):
        return True


def solve(cities):
    return Tour()
"""

POINTER_ARRAY = """
class Weights:  # numpy in the runner would read the runner's memory at this address
    __array_interface__ = {"shape": (16,), "typestr": "<f8", "data": (id(int), True), "version": 3}


def weights():
    return Weights()
"""

MEMORY_TREE = """
import os, time
kids = []
for _ in range(6):
    pid = os.fork()
    if pid == 0:
        block = bytearray(100 << 20)
        block[::4096] = b"x" * len(block[::4096])
        time.sleep(1.0)
        os._exit(0)
    kids.append(pid)
for pid in kids:
    os.waitpid(pid, 0)
"""
