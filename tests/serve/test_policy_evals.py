"""The policy page charts what ``eval-policy`` stored: pass@k and effective answers per version."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from qdevolve.db.store import LineageStore

from .chromium import Chromium, Page
from .conftest import Server, copy_db

pytestmark = pytest.mark.timeout(240)

KEY = "few_answer/train/n=64/seed=0"
SCORES = {0: (0.2, 0.9, 25.0), 1: (0.3, 0.95, 20.0), 2: (0.5, 0.97, 12.5)}  # pass@1, pass@64, effective answers


@pytest.fixture(scope="module")
def scored(view_db: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    """The viewer's database with eval-policy results stored through the store's own method."""
    path = copy_db(view_db["path"], tmp_path_factory.mktemp("serve-evals"))
    rid = view_db["run_id"]
    with LineageStore(path) as store:
        for v, (p1, p64, eff) in SCORES.items():
            store.record_policy_eval(rid, v, KEY, {"metrics": {"pass@1": p1, "pass@64": p64, "D_64": 3.0,
                                                              "effective_outcomes": eff}, "prompts": 4})
        store.record_policy_eval(rid, 2, "other/test/n=8/seed=1", {"metrics": {"pass@1": 0.0}})
        # a later evaluation with the same setting replaces the earlier one, others stay
        store.record_policy_eval(rid, 2, KEY, {"metrics": {"pass@1": 0.5, "pass@64": 0.97, "D_64": 3.0,
                                                          "effective_outcomes": 12.5, "bad": "x"}})
        metrics = store.policy_versions(rid)[2]["metrics"]
        assert set(metrics["evals"]) == {KEY, "other/test/n=8/seed=1"} and metrics["loss"] == 0.5
    s = Server(path)
    yield s, rid
    s.stop()


@pytest.mark.slow
def test_api_gives_pass_at_k_and_effective_answers_per_version(scored: tuple[Server, str]) -> None:
    server, rid = scored
    ev = server.json(f"/api/runs/{rid}/policy")["evals"]
    assert ev["key"] == KEY and ev["ks"] == [1, 64]
    assert [(r["version"], r["pass@1"], r["pass@64"], r["effective_outcomes"]) for r in ev["rows"]] == \
        [(v, *s) for v, s in SCORES.items()]


@pytest.mark.slow
def test_policy_page_draws_the_eval_chart(browser: Chromium, scored: tuple[Server, str], server: Server,
                                          view_db: dict[str, Any]) -> None:
    srv, rid = scored
    page: Page = browser.new_page()
    try:
        page.navigate(f"{srv.url}/runs/{rid}/policy", wait_for="document.body.dataset.policyReady")
        assert page.evaluate("document.body.dataset.policyEvals") == "3"
        assert page.evaluate("document.getElementById('policy-evals').offsetHeight") > 100
        assert page.evaluate("document.querySelector('#policy-evals canvas') !== null")
        assert "pass@k and effective answers" in page.evaluate(
            "document.getElementById('policy-evals-summary').textContent")
        # a run whose versions were never scored says how to score them, and draws no empty chart
        page.navigate(f"{server.url}/runs/{view_db['run_id']}/policy", wait_for="document.body.dataset.policyReady")
        assert page.evaluate("document.body.dataset.policyEvals") == "0"
        assert page.evaluate("document.getElementById('policy-evals').hidden") is True
        assert "qdevolve eval-policy" in page.evaluate("document.getElementById('policy-evals-summary').textContent")
        assert not [m for m in page.console() if "Uncaught" in m or "Content Security Policy" in m]
    finally:
        page.close()
