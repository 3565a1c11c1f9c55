"""The warm path of the ``local`` sandbox: a pre-imported template per worker thread forks a
fresh, isolated runner/candidate pair per evaluation. Nothing leaks from one evaluation into
the next, the examples score as cold, and the attacks hold."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from qdevolve.sandbox import SandboxLimits
from qdevolve.sandbox.attacks import ATTACKS, HostCanaries, backend_leftovers, check_attack
from qdevolve.types import Program

from .conftest import make_box

REPO = Path(__file__).resolve().parents[2]
LIMITS = SandboxLimits(wall_s=10, cpu_s=5, memory_mb=512)


@pytest.fixture(scope="module")
def warm_box():
    box = make_box("local", warm=True)
    if not box.warm:
        box.close()
        pytest.skip("no namespaces here: the local sandbox has no warm path")
    yield box
    box.close()
    assert not box.staging.root.exists()


def test_nothing_leaks_between_evaluations(warm_box):
    first = """
import builtins, os, sys, time
open('/tmp/leak', 'w').write('x'); open('/dev/shm/leak', 'w').write('x'); open('leak', 'w').write('x')
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


def test_attacks_hold_on_the_warm_path(warm_box):
    with HostCanaries() as host:
        for attack in WARM_ATTACKS:
            row = check_attack(warm_box, attack, host, leftovers=backend_leftovers(warm_box))
            assert row.passed, (attack.name, row.got, row.failures)
    after = warm_box.evaluate(Program(code="print('next')"), None, LIMITS)
    assert after.status == "ok" and after.artifacts["stdout"] == "next\n"
    assert os.environ.get("QDEVOLVE_CANARY") is None
