"""Fixtures of the sandbox tests: one sandbox per backend (module scope), the Docker image.

Docker tests build ``qdevolve-sandbox:latest`` themselves when it is missing and skip, with
the reason, only when no Docker engine answers.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from qdevolve import registry
from qdevolve.sandbox.attacks import HostCanaries

REPO = Path(__file__).resolve().parents[2]
PROCESS_BACKENDS = ["local", "bwrap"]


def _wrappers() -> dict:
    from qdevolve.evolve.compat.shinka_compat import adapter_evaluator

    return {"shinka": adapter_evaluator}


#: The evaluator adapters the catalogue's adapter rows need (as ``qdevolve sandbox check`` passes them).
WRAPPERS = _wrappers()


@pytest.fixture(scope="session")
def docker_image() -> str:
    """The sandbox image, built by ``sandboxes/docker/build-image.sh`` when missing."""
    from qdevolve.sandbox.docker_backend import DEFAULT_IMAGE, docker_available

    why = docker_available()
    if why:
        pytest.skip(f"DOCKER TESTS SKIPPED: {why}")
    import docker

    client = docker.from_env()
    try:
        client.images.get(DEFAULT_IMAGE)
    except docker.errors.ImageNotFound:
        r = subprocess.run(["bash", str(REPO / "sandboxes/docker/build-image.sh")],
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f"build-image.sh failed:\n{r.stdout}\n{r.stderr}"
    finally:
        client.close()
    return DEFAULT_IMAGE


def make_box(name: str, **options):
    if name == "bwrap":
        from qdevolve.sandbox.bwrap import bwrap_available

        if not bwrap_available():
            pytest.skip("BWRAP TESTS SKIPPED: bubblewrap is missing or cannot create namespaces here")
    return registry.sandbox.create({"type": name, **options})


@pytest.fixture(scope="module", params=PROCESS_BACKENDS)
def process_box(request):
    box = make_box(request.param)
    yield box
    box.close()
    assert not box.staging.root.exists(), "staging directory left behind"


@pytest.fixture(scope="module")
def host():
    with HostCanaries() as h:
        yield h
