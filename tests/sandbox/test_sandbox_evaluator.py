"""The evaluator protocol end to end inside real sandboxes (local and bwrap), plus the
static evaluator check and thread safety."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from qdevolve.errors import EvaluationSetupError
from qdevolve.sandbox import SandboxLimits, check_evaluator
from qdevolve.types import Program

LIMITS = SandboxLimits(wall_s=10, cpu_s=5, memory_mb=512)

PROGRAM = """
def solve(n):
    return sum(range(n))
"""

EVALUATOR_HEAD = """
import importlib.util, math

def load(path):
    spec = importlib.util.spec_from_file_location("candidate", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
"""


def write(tmp_path: Path, body: str, name: str = "evaluator.py") -> Path:
    p = tmp_path / name
    p.write_text(EVALUATOR_HEAD + body)
    return p


def run(box, tmp_path, body, program=PROGRAM, **kw):
    return box.evaluate(Program(code=program), write(tmp_path, body), LIMITS, **kw)


def test_dict_result(process_box, tmp_path):
    r = run(process_box, tmp_path, """
def evaluate(path):
    m = load(path)
    ok = m.solve(10) == 45
    print("evaluated", path.endswith("program.py"))
    return {"combined_score": 0.75, "correct": float(ok), "tests": [1.0, 0.0, 0.5],
            "features": {"length": 3}, "artifacts": {"feedback": "good job"}}
""")
    assert r.status == "ok", r.error
    assert r.score == 0.75 and r.metrics == {"correct": 1.0}
    assert r.tests == [1.0, 0.0, 0.5] and r.features == {"length": 3.0}
    assert r.artifacts["feedback"] == "good job" and r.artifacts["stdout"] == "evaluated True\n"
    assert r.runtime_s > 0 and r.peak_memory_mb and r.peak_memory_mb > 1


def test_mean_of_metrics_without_combined_score(process_box, tmp_path):
    r = run(process_box, tmp_path, "def evaluate(path):\n    return {'a': 1.0, 'b': 0.5}\n")
    assert r.status == "ok" and r.score == pytest.approx(0.75)


def test_openevolve_evaluation_result_object(process_box, tmp_path):
    r = run(process_box, tmp_path, """
class EvaluationResult:
    def __init__(self, metrics, artifacts):
        self.metrics, self.artifacts = metrics, artifacts

def evaluate(path):
    return EvaluationResult({"combined_score": 0.5, "speed": 2}, {"stderr": "warn"})
""")
    assert r.status == "ok" and r.score == 0.5 and r.metrics == {"speed": 2.0}
    assert r.artifacts["stderr"] == "warn"


def test_numpy_scalars_from_site_packages(process_box, tmp_path):
    r = run(process_box, tmp_path, """
import numpy as np
def evaluate(path):
    return {"combined_score": np.float64(0.25), "n": np.int64(3)}
""")
    assert r.status == "ok", r.error
    assert r.score == 0.25 and r.metrics == {"n": 3.0}


@pytest.mark.parametrize("value, reason", [("math.nan", "not finite"), ("math.inf", "not finite"),
                                           ("'high'", "not numeric")])
def test_bad_metrics_are_invalid(process_box, tmp_path, value, reason):
    r = run(process_box, tmp_path, f"def evaluate(path):\n    return {{'combined_score': 1.0, 'x': {value}}}\n")
    assert r.status == "invalid" and reason in r.error and r.score is None


def test_tests_outside_unit_interval_are_invalid(process_box, tmp_path):
    r = run(process_box, tmp_path, "def evaluate(path):\n    return {'combined_score': 1, 'tests': [2.0]}\n")
    assert r.status == "invalid" and "[0, 1]" in r.error


def test_evaluator_exception_is_error_with_traceback(process_box, tmp_path):
    r = run(process_box, tmp_path, "def evaluate(path):\n    m = load(path)\n    return {'combined_score': m.missing()}\n")
    assert r.status == "error" and "AttributeError" in r.error
    assert "Traceback" in r.artifacts["traceback"] and "missing" in r.artifacts["traceback"]


def test_evaluator_error_string(process_box, tmp_path):
    r = run(process_box, tmp_path, "def evaluate(path):\n    return {'combined_score': 0.0, 'error': 'bad shape'}\n")
    assert r.status == "error" and "bad shape" in r.error


def test_program_sys_exit_inside_evaluator_is_error(process_box, tmp_path):
    r = run(process_box, tmp_path, "def evaluate(path):\n    load(path)\n    return {'combined_score': 1.0}\n",
            program="import sys\nsys.exit(0)\n")
    assert r.status == "error" and "SystemExit" in r.error


def test_program_forging_through_the_evaluator_process_is_rejected(process_box, tmp_path):
    # The candidate runs in its own process: it cannot reach the record channel, so a forged
    # record is never read; leaving early is a failed status with no score.
    program = ("import glob, json, os\nfake = json.dumps({'nonce': 'x', 'status': 'ok', 'score': 99.0})\n"
               "for fd in range(3, 64):\n    try:\n        os.write(fd, fake.encode())\n    except OSError:\n        pass\n"
               "os._exit(0)\n")
    r = run(process_box, tmp_path, "def evaluate(path):\n    load(path)\n    return {'combined_score': 0.1}\n",
            program=program)
    assert r.status == "error" and "CandidateDied" in r.error and r.score is None


CASCADE = """
def evaluate(path):
    return {"combined_score": 1.0, "full": 1.0}

def evaluate_stage1(path):
    return {"combined_score": SCORE1, "s1": 1.0}

def evaluate_stage2(path):
    return {"combined_score": 0.9, "s2": 1.0}
"""


def test_cascade_stops_below_threshold(process_box, tmp_path):
    r = run(process_box, tmp_path, CASCADE.replace("SCORE1", "0.2"), cascade_thresholds=[0.5])
    assert r.status == "ok" and r.score == 0.2 and r.metrics == {"s1": 1.0}
    assert r.artifacts["cascade_stage"] == "1" and "threshold 0.5" in r.artifacts["cascade_stopped"]


def test_cascade_passes_to_next_stage(process_box, tmp_path):
    r = run(process_box, tmp_path, CASCADE.replace("SCORE1", "0.8"), cascade_thresholds=[0.5, 0.95])
    assert r.status == "ok" and r.score == 0.9 and r.metrics == {"s1": 1.0, "s2": 1.0}
    assert r.artifacts["cascade_stage"] == "2"


def test_no_cascade_without_thresholds(process_box, tmp_path):
    r = run(process_box, tmp_path, CASCADE.replace("SCORE1", "0.2"))
    assert r.score == 1.0 and r.metrics == {"full": 1.0}


def test_evaluator_file_is_not_modified_and_runs_only_in_the_sandbox(process_box, tmp_path):
    marker = tmp_path / "ran-in-controller"
    ev = write(tmp_path, f"open({str(marker)!r}, 'w').write('x')\ndef evaluate(path):\n    return {{'combined_score': 1.0}}\n")
    before = ev.read_bytes()
    check_evaluator(ev)
    assert not marker.exists()  # the static check executed nothing
    r = process_box.evaluate(Program(code="x = 1"), ev, LIMITS)
    # inside the sandbox the host path is unreachable (bwrap) or not writable (local, 0700 dir)
    assert r.status == "error" and not marker.exists()
    assert ev.read_bytes() == before


def test_check_evaluator_errors(tmp_path):
    with pytest.raises(EvaluationSetupError, match="does not exist"):
        check_evaluator(tmp_path / "nope.py")
    bad = tmp_path / "bad.py"
    bad.write_text("def evaluate(path:\n")
    with pytest.raises(EvaluationSetupError, match=r"bad\.py has a syntax error at line 1"):
        check_evaluator(bad)
    none = tmp_path / "none.py"
    none.write_text("def score(path):\n    return {}\n")
    with pytest.raises(EvaluationSetupError, match=r"none\.py defines no evaluate"):
        check_evaluator(none)
    ok = tmp_path / "ok.py"
    ok.write_text("from helpers import evaluate\n")
    check_evaluator(ok)


def test_concurrent_evaluations_do_not_mix(process_box):
    def one(i: int):
        return i, process_box.evaluate(Program(code=f"print('program-{i}')"), None, LIMITS)

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(one, range(16)))
    for i, r in results:
        assert r.status == "ok" and r.artifacts["stdout"] == f"program-{i}\n"
    assert threading.active_count() < 20


def test_best_available_probes_bwrap():
    from qdevolve.sandbox import best_available
    from qdevolve.sandbox.bwrap import bwrap_available

    assert best_available() == ("bwrap" if bwrap_available() else "local")


def test_missing_evaluator_is_a_setup_error(process_box, tmp_path):
    with pytest.raises(EvaluationSetupError, match="nope.py cannot be read"):
        process_box.evaluate(Program(code="x = 1"), tmp_path / "nope.py", LIMITS)


def test_limits_as_mapping(process_box):
    r = process_box.evaluate(Program(code="import time\ntime.sleep(5)"), None, {"wall_s": 0.5})
    assert r.status == "timeout" and r.runtime_s < 3


def test_staging_of_a_killed_controller_is_removed_later():
    import subprocess
    import sys

    from qdevolve.sandbox._staging import Staging

    code = ("import os\nfrom qdevolve.sandbox._staging import Staging\ns = Staging(prefix='qdevolve-local-')\n"
            "print(s.root, flush=True)\nos.kill(os.getpid(), 9)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    stale = Path(r.stdout.strip())
    assert r.returncode == -9 and stale.is_dir()
    fresh = Staging(prefix="qdevolve-local-")
    try:
        assert not stale.exists()
    finally:
        fresh.close()
    assert not fresh.root.exists()


def test_local_home_and_tmpdir_are_the_work_dir():
    from qdevolve import registry

    box = registry.sandbox.create({"type": "local"})
    try:
        r = box.evaluate(Program(code="import os, tempfile\nprint(os.environ['HOME'] == os.getcwd(), "
                                      "tempfile.gettempdir() == os.getcwd())"), None, LIMITS)
    finally:
        box.close()
    assert r.status == "ok" and r.artifacts["stdout"] == "True True\n"
