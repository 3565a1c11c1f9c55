"""Warm means pre-imported, not shared (issue 19, items 5, 8).

Every writable directory, ``/dev/shm``, SysV shared memory and message queues and POSIX
message queues are fresh per evaluation on every backend, warm ones included: a program
that finds what it wrote in the previous evaluation fails. ``docker --warm`` serves
evaluations with any ``cpu_s`` (it failed every one above about 34 s).
"""

from __future__ import annotations

import pytest

from qdevolve.sandbox import SandboxLimits
from qdevolve.sandbox.attacks import ATTACKS, check_attack
from qdevolve.types import Program

from ._backends import box_fixture  # noqa: F401 - the ``box`` fixture

LIMITS = SandboxLimits(wall_s=20, cpu_s=10)
PERSIST = next(a for a in ATTACKS if a.name == "warm_persistence")


def test_nothing_survives_into_the_next_evaluation(box, host):
    code = host.render(PERSIST.code)
    results = [box.evaluate(Program(code=code), None, LIMITS) for _ in range(3)]
    assert [r.status for r in results] == ["ok"] * 3, [(r.status, r.error) for r in results]


def test_catalogue_warm_persistence_holds(box, host):
    row = check_attack(box, PERSIST, host)
    assert row.passed, row.failures


@pytest.mark.docker
@pytest.mark.slow
def test_docker_warm_serves_any_cpu_limit(docker_image):
    from .conftest import make_box

    warm = make_box("docker", image=docker_image, warm=True)
    try:
        code = "import resource\nprint(resource.getrlimit(resource.RLIMIT_CPU))"
        for cpu in (10, 40, 120, 35):
            r = warm.evaluate(Program(code=code), None, SandboxLimits(wall_s=150, cpu_s=cpu))
            assert r.status == "ok", (cpu, r.error, r.artifacts)
            assert f"({cpu}, {cpu + 1})" in r.artifacts["stdout"]
        assert len(warm.containers()) == 1  # one warm container served them all
    finally:
        warm.close()


def test_warm_docker_container_has_no_cpu_ulimit_and_is_keyed_by_limits():
    from qdevolve.sandbox.docker_backend import _shape
    from qdevolve.sandbox.limits import render_docker_kwargs

    limits = SandboxLimits(wall_s=30, cpu_s=30)
    cold = render_docker_kwargs(limits, image="i", user="65533:65533", env={}, mounts={})
    warm = render_docker_kwargs(limits, image="i", user="65533:65533", env={}, mounts={}, cpu_backstop=False)
    assert next(u for u in cold["ulimits"] if u["name"] == "cpu")["hard"] == 35
    assert next(u for u in warm["ulimits"] if u["name"] == "cpu") == {"name": "cpu", "soft": -1, "hard": -1}
    assert _shape(limits) == _shape(limits.replace(cpu_s=100, wall_s=200))  # same container
    assert _shape(limits) != _shape(limits.replace(memory_mb=256))  # a new one
