"""Fixtures shared by the whole suite (keep small; subdirectories have their own)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from qdevolve import registry


@pytest.fixture
def registry_snapshot() -> Iterator[None]:
    """Registrations made inside the test are undone afterwards."""
    with registry.snapshot():
        yield


@pytest.fixture
def tmp_db(tmp_path: Path) -> Path:
    """A path for a fresh SQLite lineage database (not created yet)."""
    return tmp_path / "run.sqlite"


@pytest.fixture
def pg_url() -> str:
    """The PostgreSQL URL exported by ``.ci/run`` (tests marked ``postgres`` skip without it)."""
    url = os.environ.get("QDEVOLVE_TEST_PG_URL")
    if not url:
        pytest.skip("QDEVOLVE_TEST_PG_URL is not set; .ci/run starts a local PostgreSQL and exports it")
    return url
