"""Three principals on every backend: the candidate's uid is not the runner's, the evaluator's
directory travels with it and only the runner reads it, nothing the candidate can write is on
the runner's import path, and the runner's failure path imports nothing once candidate code ran.

Parametrised over local, local warm, bwrap, bwrap warm (as root: the uid pool) and docker,
docker warm (marked ``docker``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from qdevolve.sandbox.attacks import ATTACKS, HostCanaries, check_attack
from qdevolve.sandbox.limits import SandboxLimits
from qdevolve.types import Program

from .conftest import make_box

pytestmark = pytest.mark.slow

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="three principals need root (the uid pool)")
LIMITS = SandboxLimits(wall_s=20.0, cpu_s=10.0, memory_mb=1024, processes=64)
BACKENDS = [
    pytest.param(("local", False), id="local"),
    pytest.param(("local", True), id="local-warm"),
    pytest.param(("bwrap", False), id="bwrap"),
    pytest.param(("bwrap", True), id="bwrap-warm"),
    pytest.param(("docker", False), id="docker", marks=pytest.mark.docker),
    pytest.param(("docker", True), id="docker-warm", marks=pytest.mark.docker),
]


@pytest.fixture(scope="module", params=BACKENDS)
def box(request):
    name, warm = request.param
    if name == "docker":
        image = request.getfixturevalue("docker_image")
        b = make_box("docker", image=image, warm=warm)
    else:
        if os.geteuid() != 0:
            pytest.skip("three principals need root (the uid pool)")
        b = make_box(name, warm=warm)
    yield b
    b.close()


# An evaluator that reads data beside itself (also in a subdirectory), imports a helper module
# beside itself, and reports the runner's and the candidate's uids and what the candidate saw.
EVALUATOR = '''
import importlib.util, json, os, stat, sys
from pathlib import Path

import helper  # a module beside the evaluator

DATA = json.loads((Path(__file__).parent / "instances.json").read_text())
DEEP = (Path(__file__).parent / "data" / "deep.txt").read_text().strip()


def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("candidate", program_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    cand = mod.whoami()
    writable = []
    for entry in sys.path:
        try:
            st = os.stat(entry)
        except OSError:
            continue
        if st.st_uid == cand or st.st_mode & 0o002:
            writable.append(entry)
    here = Path(__file__).parent
    return {"combined_score": float(mod.solve(DATA["n"]) == helper.expected(DATA["n"])),
            "runner_uid": float(os.getuid()), "candidate_uid": float(cand),
            "deep_ok": float(DEEP == "deep-" + DATA["secret"]),
            "leaked": float(DATA["secret"] in mod.seen()),
            "source_leaked": float("SOURCE-MARKER" in mod.seen()),
            "writable_on_path": float(len(writable)),
            "bytecode": float(not sys.dont_write_bytecode or (here / "__pycache__").exists()),
            "artifacts": {"writable": ",".join(writable)}}
# SOURCE-MARKER
'''
HELPER = "def expected(n):\n    return n * (n - 1) // 2\n"
PROGRAM = '''
import glob, os
SEEN = []
for pat in ["/qdevolve/evaluator/*", "/qdevolve/evaluator/*/*", "/qdevolve/evaluators/*/*",
            "/qdevolve/evaluators/*/*/*", "/tmp/qdevolve-*/evaluators/*/*", "__EVALDIR__/*", "__EVALDIR__/*/*"]:
    for p in glob.glob(pat):
        try:
            with open(p, errors="replace") as fh:
                SEEN.append(fh.read())
        except OSError:
            pass


def solve(n):
    return n * (n - 1) // 2


def whoami():
    return os.getuid()


def seen():
    return "\\n".join(SEEN)
'''


def _evaluator_dir(tmp_path: Path, secret: str) -> Path:
    d = tmp_path / "problem"
    (d / "data").mkdir(parents=True)
    (d / "evaluator.py").write_text(EVALUATOR)
    (d / "helper.py").write_text(HELPER)
    (d / "instances.json").write_text(json.dumps({"n": 10, "secret": secret}))
    (d / "data" / "deep.txt").write_text(f"deep-{secret}\n")
    os.chmod(tmp_path, 0o755)  # the host copy itself is readable: only the sandbox may hide it
    return d / "evaluator.py"


def test_evaluator_directory_travels_and_only_the_runner_reads_it(box, tmp_path):
    ev = _evaluator_dir(tmp_path, "s3cr3t-answer-key")
    r = box.evaluate(Program(code=PROGRAM.replace("__EVALDIR__", str(ev.parent))), str(ev), LIMITS)
    assert r.status == "ok", (r.error, r.artifacts)
    assert r.score == 1.0 and r.metrics["deep_ok"] == 1.0
    assert r.metrics["leaked"] == 0.0, "the candidate read the data file beside the evaluator"
    assert r.metrics["source_leaked"] == 0.0, "the candidate read the evaluator's source"
    assert r.metrics["runner_uid"] != r.metrics["candidate_uid"], "the candidate runs as the runner"
    assert r.metrics["writable_on_path"] == 0.0, r.artifacts.get("writable")
    assert r.metrics["bytecode"] == 0.0, "the runner wrote bytecode (or may)"
    # a second evaluation reuses the copy; an edited data file is copied again
    (ev.parent / "instances.json").write_text('{"n": 11, "secret": "other"}')
    (ev.parent / "data" / "deep.txt").write_text("deep-other\n")
    r2 = box.evaluate(Program(code=PROGRAM.replace("__EVALDIR__", str(ev.parent))), str(ev), LIMITS)
    assert r2.status == "ok" and r2.metrics["deep_ok"] == 1.0, (r2.error, r2.artifacts)


@pytest.mark.parametrize("name", ["forge_planted_module", "read_evaluator_files", "honest_with_data"])
def test_catalogue_rows_of_this_issue(box, name):
    attack = next(a for a in ATTACKS if a.name == name)
    with HostCanaries() as host:
        row = check_attack(box, attack, host)
    assert row.passed, row.failures


FAILING_EVALUATOR = '''
def evaluate(program_path):
    raise {exc}
'''


@pytest.mark.parametrize("exc", ["SystemExit(3)", "KeyboardInterrupt()", "GeneratorExit()"])
def test_evaluator_base_exceptions_become_records(box, tmp_path, exc):
    ev = tmp_path / "evaluator.py"
    ev.write_text(FAILING_EVALUATOR.format(exc=exc))
    r = box.evaluate(Program(code="x = 1\n"), str(ev), LIMITS)
    assert r.status == "error" and r.score is None, (r.status, r.error)
    assert exc.split("(")[0] in (r.error or ""), r.error


def test_failure_path_imports_nothing_new(box, tmp_path):
    """After the evaluation the runner imports nothing: a planted sys.path entry (as an
    evaluator might add the work dir) is never consulted by the failure path."""
    ev = tmp_path / "evaluator.py"
    ev.write_text('''
import os, sys
def evaluate(program_path):
    d = os.path.dirname(program_path)
    sys.path.insert(0, d)
    import importlib.util
    spec = importlib.util.spec_from_file_location("c", program_path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    raise SystemExit(m.code())
''')
    program = '''
import os, sys
def code():
    for name in ("traceback", "resource", "linecache", "tokenize", "textwrap", "reprlib"):
        try:
            with open(name + ".py", "w") as fh:
                fh.write("import os\\nos._exit(0)\\n")
        except OSError:
            pass
    return 3
'''
    r = box.evaluate(Program(code=program), str(ev), LIMITS)
    assert r.status == "error" and "SystemExit" in (r.error or ""), (r.status, r.error)


def test_a_directory_the_candidate_writes_imports_only_the_program(box, tmp_path):
    """An evaluator that puts the program's directory on sys.path imports the program (a
    stand-in) from there, never a module the candidate planted beside it."""
    ev = tmp_path / "evaluator.py"
    ev.write_text('''
import os, sys
def evaluate(program_path):
    sys.path.insert(0, os.path.dirname(program_path))
    import program
    program.plant()
    try:
        import planted_helper
        got = planted_helper.VALUE
    except ImportError:
        got = 0.0
    return {"combined_score": float(program.answer()), "planted": float(got)}
''')
    code = '''
def plant():
    with open("planted_helper.py", "w") as fh:
        fh.write("VALUE = 1e9\\n")
def answer():
    return 0.5
'''
    r = box.evaluate(Program(code=code), str(ev), LIMITS)
    assert r.status == "ok", (r.error, r.artifacts)
    assert r.score == 0.5 and r.metrics["planted"] == 0.0, r.metrics


def test_the_candidates_scratch_directories_are_writable_and_sticky(box):
    """The candidate writes in /tmp, /dev/shm and its work dir (root's or the runner's
    files there stay out of its reach: the directories are sticky)."""
    code = ("import os\nfor d in ('/tmp', '/dev/shm', '.'):\n    open(os.path.join(d, 'x'), 'w').write('1')\n"
            "print(' '.join(oct(os.stat(d).st_mode & 0o7777) for d in ('/tmp', '/dev/shm', '.')))\n")
    r = box.evaluate(Program(code=code), None, LIMITS)
    assert r.status == "ok", (r.error, r.artifacts)
    assert r.artifacts["stdout"].split() == ["0o1777"] * 3


def test_single_uid_bwrap_also_carries_the_evaluator_directory(tmp_path):
    """A normal user's bwrap (one uid; simulated by an empty uid pool) binds the evaluator's
    whole directory too: data beside the evaluator loads."""
    (tmp_path / "evaluator.py").write_text(
        "from pathlib import Path\nN = int((Path(__file__).parent / 'n.txt').read_text())\n"
        "def evaluate(p):\n    return {'combined_score': N / 10}\n")
    (tmp_path / "n.txt").write_text("7")
    b = make_box("bwrap")
    b.uids = None
    try:
        r = b.evaluate(Program(code="x = 1\n"), str(tmp_path / "evaluator.py"), LIMITS)
    finally:
        b.close()
    assert r.status == "ok" and r.score == 0.7, (r.status, r.error)
