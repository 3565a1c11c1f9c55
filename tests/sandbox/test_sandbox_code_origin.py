"""Default-deny in the trusted runner (issue 29): once the candidate exists, no code built
from bytes the candidate could have written runs in the runner; it runs in the candidate's
process through the stand-in, or the evaluation fails. Code the evaluator and the standard
library generate themselves still runs in the runner.

Each evaluator below reports, through ``os.getpid()`` of the code it ran, *where* it ran: the
runner's pid is the evaluator's own, any other is the candidate's process.
"""

from __future__ import annotations

import pytest

from qdevolve.sandbox.limits import SandboxLimits
from qdevolve.sandbox.origin_attacks import (
    heap_clean,
    printed_results,
    proc_sys_untouched,
    syscalls_failed,
)
from qdevolve.types import EvalResult, Program

from .conftest import make_box

LIMITS = SandboxLimits(wall_s=20.0, cpu_s=10.0, memory_mb=1024, processes=64)

PROGRAM = "import os\n\n\ndef value():\n    return 0.5\n\n\ndef where():\n    return os.getpid()\n"

# the OpenEvolve ways of running the program's text: each must run it in the candidate
EXEC_TEXT = '''
import os
def evaluate(program_path):
    ns = {}
    exec(open(program_path).read(), ns)
    return {"combined_score": ns["value"](), "here": float(ns["where"]() == os.getpid())}
'''
COMPILE_LATIN1 = '''
import os, types
def evaluate(program_path):
    src = open(program_path, "rb").read().decode("latin-1").replace("\\r\\n", "\\n").strip() + "\\n"
    mod = types.ModuleType("prog")
    exec(compile(src, program_path, "exec"), mod.__dict__)
    return {"combined_score": mod.value(), "here": float(mod.where() == os.getpid())}
'''
SPEC = '''
import importlib.util, os
def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("prog", program_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return {"combined_score": mod.value(), "here": float(mod.where() == os.getpid())}
'''
# text the candidate returns through the stand-in, executed by the evaluator
RETURNED = '''
import importlib.util, os
def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("prog", program_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    ns = {}
    exec(mod.source(), ns)
    return {"combined_score": mod.value(), "here": float(ns["where"]() == os.getpid())}
'''
RETURNED_PROGRAM = PROGRAM + '''

def source():
    return "import os\\ndef where():\\n    return os.getpid()\\n"
'''
# a scratch file the candidate wrote, imported by the evaluator: the candidate's bytes too
SCRATCH = '''
import importlib.util, os
def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("prog", program_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    path = mod.write_helper()
    spec = importlib.util.spec_from_file_location("helper", path)
    helper = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helper)
    return {"combined_score": mod.value(), "here": float(helper.where() == os.getpid())}
'''
# the program's bytes copied into the runner's own private directory: still the candidate's
COPIED = '''
import importlib.util, os, shutil, tempfile
def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("prog", program_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    v = mod.value()
    private = tempfile.mkdtemp(prefix="evaluator-own-")
    copy = os.path.join(private, "copy.py")
    shutil.copy(program_path, copy)
    with open(program_path, "rb") as src, open(os.path.join(private, "copy2.py"), "wb") as dst:
        dst.write(src.read() + b"\\n# copied by the evaluator\\n")
    os.rename(os.path.join(private, "copy2.py"), os.path.join(private, "moved.py"))
    here = []
    for name in ("copy.py", "moved.py"):
        spec = importlib.util.spec_from_file_location("copy", os.path.join(private, name))
        m = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(m)
        here.append(m.where() == os.getpid())
    return {"combined_score": v, "here": float(any(here))}
'''
SCRATCH_PROGRAM = PROGRAM + '''

def write_helper():
    path = os.path.join(os.getcwd(), "helper_mod.py")
    with open(path, "w") as fh:
        fh.write("import os\\ndef where():\\n    return os.getpid()\\n")
    return path
'''
# what a runner must refuse outright (no stand-in means it)
EVAL_TEXT = '''
def evaluate(program_path):
    return {"combined_score": float(eval(open(program_path).read().splitlines()[-1]))}
'''
MARSHAL = '''
import importlib.util, marshal
def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("prog", program_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    blob = mod.code_bytes()
    exec(marshal.loads(blob))
    return {"combined_score": 1e9}
'''
MARSHAL_PROGRAM = '''
import marshal


def code_bytes():
    return marshal.dumps(compile("import os; os._exit(0)", "x", "exec"))
'''
EVAL_PROGRAM = "x = 1\n1e99\n"
# the evaluator's and the standard library's own code after the candidate answered
GENERATED = '''
import collections, dataclasses, importlib.util, os, typing
def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("prog", program_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    v = mod.value()
    import fractions, statistics, typing  # lazy imports from the standard library
    class Typed:
        a: "int"
        b: "typing.Optional[list[float]]"
    hints = typing.get_type_hints(Typed)
    try:
        typing.get_type_hints(type("Bad", (), {"__annotations__": {"c": "__import__('os').getpid()"}}))
        bad = 1.0
    except PermissionError:
        bad = 0.0
    Point = collections.namedtuple("Point", "x y")
    Box = dataclasses.make_dataclass("Box", [("w", float)])
    ns = {}
    exec("def twice(x):\\n    return 2 * x\\n", ns)
    pid = eval("__import__('os').getpid()")
    score = v + Point(1, 2).x * 0 + Box(1.0).w * 0 + statistics.mean([0, 0]) + float(fractions.Fraction(0))
    return {"combined_score": score, "twice": ns["twice"](2), "here": float(pid == os.getpid()),
            "hints": float(hints["a"] is int), "bad": bad}
'''


@pytest.fixture(scope="module", params=["local", "local-warm", "bwrap-warm"])
def box(request):
    name, _, warm = request.param.partition("-")
    b = make_box(name, warm=bool(warm))
    yield b
    b.close()


def _run(box, tmp_path, evaluator: str, program: str = PROGRAM, crlf: bool = False):
    ev = tmp_path / "evaluator.py"
    ev.write_text(evaluator)
    code = program.replace("\n", "\r\n") if crlf else program
    return box.evaluate(Program(code=code), str(ev), LIMITS)


@pytest.mark.slow
@pytest.mark.parametrize("crlf", [False, True], ids=["lf", "crlf"])
@pytest.mark.parametrize("evaluator", [EXEC_TEXT, COMPILE_LATIN1, SPEC], ids=["exec_text", "compile_latin1", "spec"])
def test_program_text_runs_in_the_candidate(box, tmp_path, evaluator, crlf):
    r = _run(box, tmp_path, evaluator, crlf=crlf)
    assert r.status == "ok", (r.status, r.error, r.artifacts.get("traceback"))
    assert r.score == 0.5
    assert r.metrics["here"] == 0.0, "the program's code ran in the trusted runner"


@pytest.mark.slow
def test_a_scratch_file_of_the_candidate_runs_in_the_candidate(box, tmp_path):
    r = _run(box, tmp_path, SCRATCH, SCRATCH_PROGRAM)
    assert r.status == "ok", (r.status, r.error, r.artifacts.get("traceback"))
    assert r.metrics["here"] == 0.0, "a module the candidate wrote ran in the trusted runner"


@pytest.mark.slow
def test_text_the_candidate_returned_runs_in_the_candidate(box, tmp_path):
    r = _run(box, tmp_path, RETURNED, RETURNED_PROGRAM)
    assert r.status == "ok", (r.status, r.error, r.artifacts.get("traceback"))
    assert r.score == 0.5 and r.metrics["here"] == 0.0, "text from the candidate ran in the trusted runner"


@pytest.mark.slow
def test_candidate_bytes_the_runner_copied_stay_the_candidates(box, tmp_path):
    """Run in the candidate's process, or fail (here: the candidate cannot read the runner's
    private directory, so loading the copy there fails)."""
    r = _run(box, tmp_path, COPIED)
    assert r.metrics.get("here") != 1.0, "a copy of the program ran in the trusted runner"
    assert (r.status == "ok" and r.score == 0.5) or (r.status == "error" and r.score is None), (r.status, r.error)
    if r.status == "error":
        assert "copy.py" in (r.error or ""), r.error


@pytest.mark.slow
@pytest.mark.parametrize("evaluator,program", [(EVAL_TEXT, EVAL_PROGRAM), (MARSHAL, MARSHAL_PROGRAM)],
                         ids=["eval_text", "marshal"])
def test_code_from_candidate_bytes_is_refused(box, tmp_path, evaluator, program):
    r = _run(box, tmp_path, evaluator, program)
    assert r.status == "error" and r.score is None, (r.status, r.score, r.error)
    assert "refuses" in (r.error or "") and "candidate could have written" in (r.error or ""), r.error


@pytest.mark.slow
def test_code_the_evaluator_and_the_stdlib_generate_still_runs_here(box, tmp_path):
    r = _run(box, tmp_path, GENERATED)
    assert r.status == "ok", (r.status, r.error, r.artifacts.get("traceback"))
    assert r.score == 0.5 and r.metrics["twice"] == 4.0
    assert r.metrics["here"] == 1.0, "the evaluator's own eval ran elsewhere"
    assert r.metrics["hints"] == 1.0, "a string annotation (a type expression) was refused"
    assert r.metrics["bad"] == 0.0, "an annotation that calls something was evaluated in the runner"


def test_effect_checks_fail_when_the_attack_took_effect():
    """The effect checks of the catalogue are not vacuous: a printed success is a failure."""
    ok = EvalResult(status="ok", score=1.0, artifacts={"stdout": "RESULT setuid -1 1\nRESULT unshare -1 1\n"
                                                                    "RESULT mount -1 1\n"})
    assert syscalls_failed(ok, None) == []
    won = EvalResult(status="ok", score=1.0, artifacts={"stdout": "RESULT setuid 0 0\nRESULT unshare -1 1\n"})
    fails = syscalls_failed(won, None)
    assert any("setuid succeeded" in f for f in fails) and any("mount" in f for f in fails)
    poked = EvalResult(status="ok", score=1.0, artifacts={"stdout": "RESULT hostname written\nRESULT sysrq refused 13\n"
                                                                    "RESULT thp refused 30\nRESULT ptrace -1 1\n"})
    assert [f for f in proc_sys_untouched(poked, None) if "hostname" in f]
    assert printed_results(poked)["ptrace"] == "-1 1"

    class Host:
        job_value = "jobcanary-" + "0" * 24

    found = EvalResult(status="ok", score=1.0, artifacts={"stdout": f"RESULT scanned 9\nFOUND {Host.job_value}\n"})
    assert heap_clean(found, Host()) and not heap_clean(EvalResult(status="ok", score=1.0,
                                                                   artifacts={"stdout": "RESULT scanned 9\n"}), Host())


def _examples() -> list:
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "examples"
    return sorted(d.name for d in root.iterdir() if (d / "evaluator.py").exists() and list(d.glob("initial_program.*")))


@pytest.mark.slow
@pytest.mark.parametrize("name", _examples())
def test_every_example_seed_scores_in_the_sandbox_what_it_scores_in_process(box, name, tmp_path, monkeypatch):
    """Honest candidates score what they scored before: each shipped example's seed, scored
    by its evaluator in this process (no sandbox, as OpenEvolve does) and in the sandbox."""
    import importlib.util
    import shutil
    from pathlib import Path

    ex = Path(__file__).resolve().parents[2] / "examples" / name
    seed = sorted(ex.glob("initial_program.*"))[0]
    if seed.suffix == ".c" and shutil.which("gcc") is None:
        pytest.skip("needs gcc")
    monkeypatch.chdir(tmp_path)  # an evaluator may build in its working directory
    spec = importlib.util.spec_from_file_location(f"example_evaluator_{name}", ex / "evaluator.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    direct = module.evaluate(str(seed))
    expected = direct["combined_score"] if isinstance(direct, dict) else direct.metrics["combined_score"]
    language = "c" if seed.suffix == ".c" else "python"
    r = box.evaluate(Program(code=seed.read_text(), language=language), str(ex / "evaluator.py"),
                     SandboxLimits(wall_s=60.0, cpu_s=40.0, memory_mb=2048))
    assert r.status == "ok", (r.status, r.error, r.artifacts.get("traceback"))
    assert r.score == pytest.approx(expected, rel=1e-12, abs=1e-12)
