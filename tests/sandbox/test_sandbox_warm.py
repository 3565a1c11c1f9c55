"""The warm paths of the ``local`` and ``bwrap`` sandboxes: a pre-imported template per worker
thread forks a fresh, isolated runner/candidate pair per evaluation. Nothing leaks from one
evaluation into the next, the examples score as cold, and the attacks hold."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from qdevolve.sandbox import SandboxLimits
from qdevolve.sandbox.attacks import (
    ATTACKS,
    HostCanaries,
    backend_leftovers,
    check_attack,
    run_catalogue,
)
from qdevolve.types import Program

from .conftest import WRAPPERS, make_box

REPO = Path(__file__).resolve().parents[2]
LIMITS = SandboxLimits(wall_s=10, cpu_s=5, memory_mb=512)


@pytest.fixture(scope="module", params=["local", "bwrap"])
def warm_box(request):
    box = make_box(request.param, warm=True)
    if not box.warm:
        box.close()
        pytest.skip(f"the {request.param} sandbox has no warm path here (local: namespaces; bwrap: root)")
    yield box
    box.close()
    assert not box.staging.root.exists()


def test_nothing_leaks_between_evaluations(warm_box):
    first = """
import builtins, ctypes, os, sys, time
open('/tmp/leak', 'w').write('x'); open('/dev/shm/leak', 'w').write('x'); open('leak', 'w').write('x')
assert ctypes.CDLL(None).shmget(0x51DE, 4096, 0o1666) >= 0  # a SysV segment outlives its creator
builtins.LEAK = 1
sys.modules['json'] = None
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(60)
    os._exit(0)
print('planted')
"""
    second = """
import builtins, os, json
seen = [p for p in ('/tmp/leak', '/dev/shm/leak', 'leak') if os.path.exists(p)]
seen += [line.split()[0] for line in open('/proc/sysvipc/shm').readlines()[1:]]
pids = [p for p in os.listdir('/proc') if p.isdigit()]
print(seen, hasattr(builtins, 'LEAK'), len(pids))
"""
    r1 = warm_box.evaluate(Program(code=first), None, LIMITS)
    assert r1.status == "ok" and r1.artifacts["stdout"] == "planted\n"
    r2 = warm_box.evaluate(Program(code=second), None, LIMITS)
    assert r2.status == "ok", r2.error
    assert r2.artifacts["stdout"] == "[] False 2\n"  # the runner and this candidate, nothing else


def test_examples_score_as_cold(warm_box):
    for name, score in (("circle_packing", 1.6586135039890426), ("expr_evolution", 0.2)):
        ex = REPO / "examples" / name
        r = warm_box.evaluate(Program(code=(ex / "initial_program.py").read_text()), ex / "evaluator.py",
                              SandboxLimits(wall_s=30, cpu_s=20))
        assert r.status == "ok" and r.score == pytest.approx(score), (name, r.error)


def test_two_workers_two_templates(warm_box):
    def one(i):
        return warm_box.evaluate(Program(code=f"print({i})"), None, LIMITS)

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(one, range(8)))
    assert [r.artifacts["stdout"] for r in results] == [f"{i}\n" for i in range(8)]


WARM_ATTACKS = [a for a in ATTACKS if a.honest is not None or a.name in (
    "sleep", "memory_bomb", "fork_bomb", "orphans", "env_secrets", "kill_everything", "exit_early",
    "read_host_files", "network_loopback")]


@pytest.mark.slow
def test_attacks_hold_on_the_warm_path(warm_box):
    with HostCanaries() as host:
        for attack in WARM_ATTACKS:
            row = check_attack(warm_box, attack, host, leftovers=backend_leftovers(warm_box), wrappers=WRAPPERS)
            assert row.passed, (attack.name, row.got, row.failures)
    after = warm_box.evaluate(Program(code="print('next')"), None, LIMITS)
    assert after.status == "ok" and after.artifacts["stdout"] == "next\n"
    assert os.environ.get("QDEVOLVE_CANARY") is None


def test_candidate_holds_no_privilege_and_cannot_stop_the_runner(warm_box):
    """The candidate runs under the evaluation's uid with no capability, no way to gain one
    by exec (no_new_privs), and the runner (pid 1 of the job's namespace) ignores its
    signals: the honest record still arrives."""
    code = """
import os
st = dict(line.split(':', 1) for line in open('/proc/self/status').read().splitlines() if ':' in line)
print(int(st['Uid'].split()[0]) != 0, int(st['CapEff'], 16), int(st['CapPrm'], 16), st['NoNewPrivs'].strip())
for sig in (9, 15, 19):
    try:
        os.kill(1, sig)
    except OSError:
        pass
print('after')
"""
    r = warm_box.evaluate(Program(code=code), None, LIMITS)
    assert r.status == "ok", r.error
    assert r.artifacts["stdout"] == "True 0 0 1\nafter\n"


def test_program_is_read_only_to_the_candidate(warm_box):
    code = """
import os
for how in (lambda: open('program.py', 'w'), lambda: os.remove('program.py'), lambda: os.rename('program.py', 'x')):
    try:
        how()
        print('changed')
    except OSError:
        print('refused')
"""
    r = warm_box.evaluate(Program(code=code), None, LIMITS)
    assert r.status == "ok" and r.artifacts["stdout"] == "refused\n" * 3, (r.error, r.artifacts)


def test_a_job_past_its_wall_clock_restarts_the_template(warm_box):
    r = warm_box.evaluate(Program(code="import time\ntime.sleep(60)"), None,
                          SandboxLimits(wall_s=1.5, cpu_s=5))
    assert r.status == "timeout"
    after = warm_box.evaluate(Program(code="print('fresh')"), None, LIMITS)
    assert after.status == "ok" and after.artifacts["stdout"] == "fresh\n"


@pytest.mark.slow
def test_whole_catalogue_on_the_warm_path(warm_box):
    """What ``qdevolve sandbox check --backend local|bwrap --warm`` runs: every row passes."""
    rows = run_catalogue(warm_box, wrappers=WRAPPERS)
    assert len(rows) == len(ATTACKS) + 1
    assert [(r.name, r.got, r.failures) for r in rows if not r.passed] == []


def test_a_template_that_cannot_start_means_cold_evaluations():
    """Where the template cannot start (here: a template command that exits at once), the
    sandbox says so once and evaluates cold instead of failing every evaluation."""
    box = make_box("local", warm=True)
    try:
        if not box.warm:
            pytest.skip("no namespaces here: the local sandbox has no warm path")
        box._zygote_spec = lambda limits: (["/bin/false"], {"keep": [], "hide": []})
        r = box.evaluate(Program(code="print('cold')"), None, LIMITS)
        assert r.status == "ok" and r.artifacts["stdout"] == "cold\n", r.error
        assert box.warm is False
    finally:
        box.close()
