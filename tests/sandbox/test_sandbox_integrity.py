"""Score integrity (issue 10): the candidate runs in its own process, the evaluator keeps
working unmodified, and nothing the candidate does reaches the stored result.

Real sandboxes (local and bwrap), real processes. The forging catalogue itself runs in
``test_sandbox_attacks.py`` (parametrised over every attack); here: every evaluator
pattern of OpenEvolve-style evaluators, the channel's rules, and a control showing the
forgeries do forge an evaluation that is not isolated.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from qdevolve.sandbox import SandboxLimits
from qdevolve.sandbox.forgeries import FORGERIES, forgery_code, write_honest_evaluator
from qdevolve.types import Program

LIMITS = SandboxLimits(wall_s=15, cpu_s=5, memory_mb=512)

PROGRAM = """
import numpy as np

N = 3

def solve(nums):
    return max(nums)

def arrays(n):
    return np.arange(n, dtype=np.float64) * 0.5, np.int64(n)

def search(objective, rng, budget):
    best = None
    for _ in range(budget):
        x = rng.uniform(-1, 1)
        v = objective(x)
        if best is None or v < best[1]:
            best = (x, v)
    return best

def boom():
    raise ValueError("bad input")

def spin():
    while True:
        pass

class Solver:
    def __init__(self, k):
        self.k = k
    def run(self, x):
        return x * self.k

if __name__ == "__main__":
    print("main ran")
"""


def _eval(box, tmp_path, body: str, program: str = PROGRAM, limits: SandboxLimits = LIMITS):
    ev = tmp_path / "evaluator.py"
    ev.write_text(body)
    return box.evaluate(Program(code=program), ev, limits)


@pytest.mark.parametrize("how", ["spec", "import", "run_path", "exec", "compile"])
def test_every_import_pattern_gets_a_working_stand_in(process_box, tmp_path, how):
    load = {
        "spec": "s = importlib.util.spec_from_file_location('cand', path)\n"
                "    m = importlib.util.module_from_spec(s)\n    s.loader.exec_module(m)",
        "import": "sys.path.insert(0, os.path.dirname(path))\n"
                  "    m = __import__(os.path.basename(path)[:-3])",
        "run_path": "m = types.SimpleNamespace(**runpy.run_path(path))",
        "exec": "ns = {}\n    exec(open(path).read(), ns)\n    m = types.SimpleNamespace(**ns)",
        "compile": "ns = {'__name__': 'cand'}\n    exec(compile(open(path).read(), path, 'exec'), ns)\n"
                   "    m = types.SimpleNamespace(**ns)",
    }[how]
    r = _eval(process_box, tmp_path, f"""
import importlib.util, os, runpy, sys, types

def evaluate(path):
    {load}
    ran_here = "numpy" in sys.modules  # the candidate imports numpy; the evaluator never did
    return {{"combined_score": m.solve([1, 5, 2]) + m.N, "ran_here": float(ran_here)}}
""")
    assert r.status == "ok", (r.error, r.artifacts)
    assert r.score == 8.0 and r.metrics["ran_here"] == 0.0
    assert "main ran" not in r.artifacts.get("stdout", "")


def test_plain_data_callbacks_objects_and_errors(process_box, tmp_path):
    r = _eval(process_box, tmp_path, """
import importlib.util, random
import numpy as np

def evaluate(path):
    s = importlib.util.spec_from_file_location("cand", path)
    m = importlib.util.module_from_spec(s)
    s.loader.exec_module(m)
    arr, n = m.arrays(4)
    assert isinstance(arr, np.ndarray) and arr.dtype == np.float64 and arr.tolist() == [0, 0.5, 1, 1.5]
    assert isinstance(n, np.integer) and n == 4
    calls = [0]
    def objective(x):  # an evaluator-side callback, counted honestly here
        calls[0] += 1
        return (x - 0.25) ** 2
    x, v = m.search(objective, random.Random(0), 50)
    try:
        m.boom()
        raised = "nothing"
    except ValueError as exc:
        raised = str(exc)
    try:  # an instance of the candidate is not plain data: it never crosses (no proxies)
        m.Solver(3)
        solver = "crossed"
    except TypeError as exc:
        solver = str(exc)
    original = m.solve
    m.solve = lambda nums: -1  # the evaluator may patch the candidate's module
    return {"combined_score": float(calls[0]), "x": x,
            "patched": m.solve([1]), "original": original([4, 9]), "artifacts": {"raised": raised, "solver": solver}}
""")
    assert r.status == "ok", (r.error, r.artifacts)
    assert r.score == 50.0 and "'Solver' cannot cross" in r.artifacts["solver"]
    assert r.metrics["patched"] == -1.0 and r.metrics["original"] == 9.0
    assert r.artifacts["raised"] == "bad input"


def test_candidate_cannot_reach_evaluator_internals(process_box, tmp_path):
    program = """
def probe(cb):
    out = []
    for name in ("__globals__", "__code__", "_private"):
        try:
            getattr(cb, name)
            out.append(name + ": reached")
        except Exception as exc:
            out.append(name + ": " + type(exc).__name__)
    return out
"""
    r = _eval(process_box, tmp_path, """
import importlib.util
SECRET = "evaluator-secret"
def evaluate(path):
    s = importlib.util.spec_from_file_location("cand", path)
    m = importlib.util.module_from_spec(s)
    s.loader.exec_module(m)
    return {"combined_score": 1.0, "artifacts": {"probe": repr(m.probe(lambda: SECRET))}}
""", program=program)
    assert r.status == "ok", r.error
    assert "reached" not in r.artifacts["probe"] and "evaluator-secret" not in r.artifacts["probe"]


@pytest.mark.slow
def test_per_call_deadline_kills_the_candidate_and_the_evaluator_decides(process_box, tmp_path):
    r = _eval(process_box, tmp_path, """
import importlib.util
def evaluate(path):
    s = importlib.util.spec_from_file_location("cand", path)
    m = importlib.util.module_from_spec(s)
    s.loader.exec_module(m)
    try:
        m.spin()
    except TimeoutError as exc:
        return {"combined_score": 0.25, "artifacts": {"why": str(exc)}}
    return {"combined_score": 1.0}
""", limits=LIMITS.replace(call_s=1.0))
    assert r.status == "ok" and r.score == 0.25 and "time limit" in r.artifacts["why"]
    # not caught: the run ends as a timeout, with no score
    r = _eval(process_box, tmp_path, """
import importlib.util
def evaluate(path):
    s = importlib.util.spec_from_file_location("cand", path)
    m = importlib.util.module_from_spec(s)
    s.loader.exec_module(m)
    m.spin()
""", limits=LIMITS.replace(call_s=1.0))
    assert r.status == "timeout" and r.score is None


def test_subprocess_evaluator_gets_an_interpreter_with_numpy(process_box, tmp_path):
    program = "import numpy as np\nprint(float(np.sum(np.arange(5))))\n"
    r = _eval(process_box, tmp_path, """
import subprocess, sys
def evaluate(path):
    out = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=10)
    return {"combined_score": float(out.stdout.strip() or -1), "rc": out.returncode,
            "artifacts": {"err": out.stderr[-500:]}}
""", program=program)
    assert r.status == "ok", (r.error, r.artifacts)
    assert r.score == 10.0 and r.metrics["rc"] == 0.0


@pytest.mark.parametrize("value, reason", [
    ("{'combined_score': 1.0, 'artifacts': {'log': 'a\\ud800b'}}", "lone surrogate"),
    ("{'combined_score': 1e308}", "exceeds"),
])
def test_records_validated_after_decoding(process_box, tmp_path, value, reason):
    r = _eval(process_box, tmp_path, f"def evaluate(path):\n    return {value}\n", program="x = 1\n")
    assert r.status == "invalid" and reason in r.error and r.score is None


def test_artifacts_capped_with_marker(process_box, tmp_path):
    r = _eval(process_box, tmp_path, """
import sys
def evaluate(path):
    print("o" * 200_000)
    return {"combined_score": 1.0, "artifacts": {"a": "x" * 60000, "b": "y" * 60000, "c": "z" * 60000,
                                                  "small": "kept"}}
""", program="x = 1\n", limits=LIMITS.replace(artifacts_bytes=100_000))
    assert r.status == "ok" and r.score == 1.0
    total = sum(len(v.encode()) for k, v in r.artifacts.items() if k != "truncated")
    assert total <= 100_000 and r.artifacts["small"] == "kept"
    assert set(r.artifacts["truncated"].split(",")) >= {"stdout"}


def test_forgeries_do_forge_an_evaluation_without_isolation(tmp_path):
    """Control: run in one process (as OpenEvolve does), the forgeries raise the score, so
    the catalogue's 'stored score == honest score' on a sandbox is not vacuous."""
    write_honest_evaluator(tmp_path).rename(tmp_path / "evaluator.py")
    forged = []
    for name in ("forge_sys_modules", "forge_gc_code", "forge_shared_modules", "forge_setprofile"):
        prog = tmp_path / f"{name}.py"
        prog.write_text(forgery_code(name))
        out = subprocess.run([sys.executable, "-c", "import evaluator, sys\n"
                              f"print(evaluator.evaluate({str(prog)!r})['combined_score'])"],
                             cwd=tmp_path, capture_output=True, text=True, timeout=60)
        if out.returncode == 0 and float(out.stdout.split()[-1]) != 0.0:
            forged.append(name)
    assert len(forged) >= 3, forged
    assert set(FORGERIES) >= set(forged)


def test_deep_directories_do_not_break_cleanup(process_box):
    program = ("import os\nstart = os.open('.', os.O_RDONLY)\nfor base in ('.', '/tmp'):\n"
               "    os.chdir(start)\n    os.chdir(base)\n    for _ in range(3000):\n"
               "        os.mkdir('d')\n        os.chdir('d')\nprint('nested')\n")
    r = process_box.evaluate(Program(code=program), None, LIMITS)
    assert r.status == "ok" and r.artifacts["stdout"] == "nested\n", r.error
    assert not list(process_box.staging.work_root.iterdir())
    from qdevolve import registry

    again = registry.sandbox.create({"type": process_box.name})  # stale-dir sweep runs here
    try:
        assert again.evaluate(Program(code="print(1)"), None, LIMITS).status == "ok"
    finally:
        again.close()


def test_remove_tree_and_stale_sweep_survive_3000_levels(tmp_path):
    import os

    from qdevolve.sandbox._staging import remove_stale_staging, remove_tree

    stale = Path(__import__("tempfile").mkdtemp(prefix="qdevolve-deep-"))
    (stale / ".owner").write_text("999999999\n")  # a pid that does not exist
    fd = os.open(stale, os.O_RDONLY)
    try:
        for _ in range(3000):  # deeper than PATH_MAX and the recursion limit
            os.mkdir("d", dir_fd=fd)
            nxt = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = nxt
    finally:
        os.close(fd)
    assert str(stale) in remove_stale_staging(prefix="qdevolve-deep-")
    assert not stale.exists()
    remove_tree(tmp_path / "missing")  # no error for a missing path


@pytest.mark.parametrize("where", ["/dev/shm", "/tmp", "."])
def test_shm_tmp_and_work_dir_are_size_limited(process_box, where):
    limits = LIMITS.replace(tmpfs_mb=8, work_mb=8, file_size_bytes=4 << 20)
    program = (f"import os\nn = 0\ntry:\n    for i in range(40):\n"
               f"        with open(os.path.join({where!r}, f'f{{i}}'), 'wb') as fh:\n"
               f"            fh.write(b'0' * (2 << 20))\n        n += 1\n"
               f"except OSError as exc:\n    print('stopped', n, exc.errno)\n")
    r = process_box.evaluate(Program(code=program), None, limits)
    assert r.status == "ok", r.error
    assert r.artifacts["stdout"].startswith("stopped") and int(r.artifacts["stdout"].split()[1]) <= 4


def test_local_sees_no_host_sockets_or_project_files(tmp_path):
    import os
    import socket
    import tempfile

    from qdevolve import registry

    repo = Path(__file__).resolve().parents[2]
    project = Path(tempfile.mkdtemp(prefix=".qdevolve-project-", dir=repo))
    (project / "archives").mkdir()
    (project / "archives" / "other-run.sqlite").write_text("other run")
    os.chmod(project, 0o755)
    rundir = Path(tempfile.mkdtemp(prefix="qdevolve-test-", dir="/run"))
    os.chmod(rundir, 0o755)
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(rundir / "db.sock"))
    os.chmod(rundir / "db.sock", 0o777)
    sock.listen(1)
    old = os.getcwd()
    os.chdir(project)
    box = registry.sandbox.create({"type": "local"})
    try:
        code = (f"import os, socket\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect({str(rundir / 'db.sock')!r})\n"
                f"    print('connected')\nexcept OSError as exc:\n    print('refused', exc.errno)\n"
                f"print(os.path.exists({str(project / 'archives' / 'other-run.sqlite')!r}))\n")
        r = box.evaluate(Program(code=code), None, LIMITS)
    finally:
        os.chdir(old)
        box.close()
        sock.close()
        import shutil

        shutil.rmtree(rundir, ignore_errors=True)
        shutil.rmtree(project, ignore_errors=True)
    if os.geteuid() != 0 and not box.userns:
        pytest.skip("no namespaces for the local sandbox here")
    assert r.status == "ok", r.error
    assert r.artifacts["stdout"].startswith("refused") and r.artifacts["stdout"].endswith("False\n")
