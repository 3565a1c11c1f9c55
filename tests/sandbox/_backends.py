"""The six sandbox configurations of the issue-19 guarantees: local, bwrap and docker, each
cold and warm (docker ones carry the ``docker`` marker)."""

from __future__ import annotations

import pytest

from .conftest import make_box

CONFIGS = [
    pytest.param(("local", False), id="local"),
    pytest.param(("local", True), id="local-warm"),
    pytest.param(("bwrap", False), id="bwrap"),
    pytest.param(("bwrap", True), id="bwrap-warm"),
    pytest.param(("docker", False), id="docker", marks=[pytest.mark.docker, pytest.mark.slow]),
    pytest.param(("docker", True), id="docker-warm", marks=[pytest.mark.docker, pytest.mark.slow]),
]


def open_box(request, config):
    """A sandbox for ``config`` (the Docker image is built or the test skipped first)."""
    name, warm = config
    options = {"warm": warm}
    if name == "docker":
        options["image"] = request.getfixturevalue("docker_image")
    return make_box(name, **options)


@pytest.fixture(scope="module", params=CONFIGS, name="box")
def box_fixture(request):
    """One sandbox per configuration, shared by a test module."""
    b = open_box(request, request.param)
    yield b
    b.close()
