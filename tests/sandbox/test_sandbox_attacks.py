"""The §B.4 attack catalogue, parametrised over (backend, attack), with host-side checks.

Each test plants canaries on the host (environment variable, a file and a SQLite database
beside it, an evaluator, a loopback listener), runs one hostile program, and asserts the
status and every host fact: no canary in any output or artifact, the listener got nothing,
checksums unchanged, no process / container / work directory left, and the next ordinary
evaluation still scores 1.0. Docker runs the whole catalogue in one test per mode, since
container start-up dominates.
"""

from __future__ import annotations

import os

import pytest

from qdevolve.sandbox.attacks import ATTACKS, backend_leftovers, check_attack, run_catalogue
from qdevolve.types import Program

from .conftest import WRAPPERS, make_box


@pytest.mark.slow
@pytest.mark.parametrize("attack", ATTACKS, ids=[a.name for a in ATTACKS])
def test_attack(process_box, host, attack):
    row = check_attack(process_box, attack, host, leftovers=backend_leftovers(process_box),
                       wrappers=WRAPPERS)
    assert row.passed, f"{process_box.name}/{attack.name}: got {row.got}: {row.failures}"
    # the controller is alive (we are running) and the next evaluation works
    after = process_box.evaluate(Program(code="print('next')"))
    assert after.status == "ok" and after.score == 1.0 and after.artifacts["stdout"] == "next\n"


def test_canary_really_is_in_the_controller_env(host):
    # guards the test above against a vacuous pass
    assert os.environ["QDEVOLVE_CANARY"] == host.env_value
    assert host.canary_file.read_text() == host.file_value


def test_catalogue_detects_a_leak(process_box, host):
    """The host checks can fail: a sandbox that allows the environment variable through is caught."""
    from dataclasses import replace

    from qdevolve.sandbox.attacks import Attack, check_limits

    leaky = replace(check_limits(), env_allow=("QDEVOLVE_CANARY",))
    attack = Attack("env_leak", "import os\nprint(os.environ.get('QDEVOLVE_CANARY'))\n", frozenset({"ok"}), "")
    row = check_attack(process_box, attack, host, leaky)
    assert not row.passed and "environment canary" in row.failures[0]


@pytest.mark.docker
@pytest.mark.slow  # ~40 s: a container per attack
@pytest.mark.parametrize("warm", [False, True], ids=["fresh", "warm"])
def test_docker_catalogue(docker_image, warm):
    box = make_box("docker", image=docker_image, warm=warm)
    try:
        rows = run_catalogue(box, wrappers=WRAPPERS)
        failed = [(r.attack, r.got, r.failures) for r in rows if not r.passed]
        assert not failed, failed
        assert len(rows) == len(ATTACKS) + 1
    finally:
        box.close()
    import docker

    client = docker.from_env()
    left = client.containers.list(all=True, filters={"label": f"qdevolve.owner={os.getpid()}"})
    client.close()
    assert not left, f"containers left behind: {[c.name for c in left]}"
