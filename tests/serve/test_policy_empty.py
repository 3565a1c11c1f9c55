"""A run that trained no policy: its policy page says so and draws no empty charts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .chromium import Chromium, Page
from .conftest import Server, copy_db, run_id_of

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def plain(run_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    """The real offline run (no policy) served as it is."""
    path = copy_db(run_db, tmp_path_factory.mktemp("serve-plain"))
    s = Server(path)
    yield s, run_id_of(path)
    s.stop()


@pytest.mark.slow
def test_policy_api_and_page_say_there_is_no_policy(plain: tuple[Server, str]) -> None:
    server, rid = plain
    assert server.json(f"/api/runs/{rid}/policy")["versions"] == []
    status, _, body = server.get(f"/runs/{rid}/policy")
    html = body.decode()
    assert status == 200
    assert "This run trained no policy" in html
    assert '<div id="policy-charts" hidden>' in html
    assert '<table class="grid" id="versions" hidden>' in html


@pytest.mark.slow
def test_policy_page_with_versions_draws_its_charts(server: Server, view_db: dict) -> None:
    status, _, body = server.get(f"/runs/{view_db['run_id']}/policy")
    html = body.decode()
    assert status == 200 and "trained no policy" not in html
    assert '<div id="policy-charts">' in html


@pytest.mark.slow
def test_empty_policy_page_in_a_browser(browser: Chromium, plain: tuple[Server, str]) -> None:
    server, rid = plain
    page: Page = browser.new_page()
    try:
        page.navigate(f"{server.url}/runs/{rid}/policy", wait_for="document.body.dataset.policyReady")
        assert page.evaluate("document.body.dataset.policyVersions") == "0"
        assert "trained no policy" in page.evaluate("document.getElementById('policy-summary').textContent")
        assert page.evaluate("document.getElementById('policy-charts').hidden") is True
        assert page.evaluate("document.getElementById('policy-charts').offsetHeight") == 0
        assert page.evaluate("document.getElementById('versions').offsetHeight") == 0
        assert not [m for m in page.console() if "Uncaught" in m or "Content Security Policy" in m]
    finally:
        page.close()
