"""The prompt-templates page of a run with ``prompt: {evolve: true}`` in a real headless
Chromium: the template tree, which template made which program (links both ways), and
model-written template text shown as text, never as markup."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from qdevolve.db import LineageStore
from qdevolve.evolve.core.engine import Evolution
from qdevolve.evolve.setup.example import load_example
from qdevolve.testing.scripted_server import ScriptedServer
from qdevolve.testing.scripts import ScriptedModel

from .chromium import Page
from .conftest import ROOT, Server

pytestmark = pytest.mark.timeout(300)
HOSTILE = '<img src=x onerror="document.body.dataset.pwned=1"><script>document.body.dataset.pwned=1</script>'


@pytest.fixture(scope="module")
def templates_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str, Path]]:
    db = tmp_path_factory.mktemp("serve-templates") / "run.sqlite"
    ex = load_example(ROOT / "examples" / "circle_packing")
    with ScriptedServer(ScriptedModel(seed=0)) as model:
        cfg = ex.config.with_overrides(
            iterations=10, workers=1, seed=1, max_pending=1, mutation=[{"type": "diff"}],
            backend={"type": "openai", "api_base": model.url, "model": "scripted"},
            prompt={**ex.config.prompt, "evolve": True, "every": 3, "population": 3, "template_mutator": "offline"})
        store = LineageStore(db)
        evo = Evolution.start(ex, cfg, store, progress=False)
        evo.run()
        evo.close()
        store.close()
    con = sqlite3.connect(db)  # a crafted template row: model text that is markup
    rid = con.execute("SELECT id FROM runs").fetchone()[0]
    seed = con.execute("SELECT id FROM prompt_templates WHERE origin = 'seed'").fetchone()[0]
    con.execute("INSERT INTO prompt_templates (id, run_id, parent_id, name, text, origin, status, reason, generation, "
                "metadata, created_at) VALUES ('hostile', ?, ?, 'diff_user', ?, 'model', 'invalid', ?, 1, '{}', ?)",
                (rid, seed, HOSTILE, HOSTILE, time.time()))
    con.commit()
    con.close()
    s = Server(db)
    yield s, rid, db
    s.stop()


@pytest.mark.slow
def test_template_tree_links_templates_and_programs(page: Page, templates_server: tuple[Server, str, Path]) -> None:
    server, rid, db = templates_server
    con = sqlite3.connect(db)
    templates = con.execute("SELECT id, parent_id FROM prompt_templates ORDER BY seq").fetchall()
    made = dict(con.execute("SELECT id, json_extract(metadata, '$.template_id') FROM programs "
                            "WHERE operator = 'diff'").fetchall())
    assert len(made) == 10 and len(templates) >= 4
    page.navigate(f"{server.url}/runs/{rid}/templates", wait_for="document.getElementById('templates') !== null")
    rows = page.evaluate("[...document.querySelectorAll('tr.tpl')].map(r => [r.id.slice(2), r.dataset.parent])")
    assert sorted(r[0] for r in rows) == sorted(t[0] for t in templates)
    assert {r[0]: r[1] or None for r in rows} == {t[0]: t[1] for t in templates}, "each row names its parent"
    links = page.evaluate("[...document.querySelectorAll('tr.tpl')].flatMap(r => [...r.querySelectorAll('a.made')]"
                          ".map(a => [r.id.slice(2), a.getAttribute('href').split('/').pop()]))")
    assert {pid: tid for tid, pid in links} == made, "every program is linked from the template that made it"
    assert page.evaluate("document.body.dataset.pwned") is None
    assert HOSTILE[:20] in page.evaluate("document.getElementById('t-hostile').textContent"), "shown as text"
    assert page.evaluate("document.querySelector('#t-hostile img, #templates script')") is None

    pid, tid = links[-1][1], links[-1][0]
    page.evaluate(f"document.querySelector('a.made[href=\"/programs/{pid}\"]').click()")
    page.wait_for("location.pathname.startsWith('/programs/') && document.getElementById('template-link') !== null")
    assert page.evaluate("document.getElementById('template-link').getAttribute('href')") == \
        f"/runs/{rid}/templates#t-{tid}", "the program page names its template"
    log = page.console()
    assert not [m for m in log if "Content Security Policy" in m or "Uncaught" in m], log


def test_a_run_without_evolving_prompts_says_so(tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    from qdevolve.serve.app import create_app

    db = tmp_path / "plain.sqlite"
    store = LineageStore(db)
    rid = store.create_run(name="plain")
    store.close()
    with TestClient(create_app(str(db), warm=False)) as client:
        r = client.get(f"/runs/{rid}/templates")
    assert r.status_code == 200 and 'data-empty="1"' in r.text and "prompt: {evolve: true}" in r.text


def test_the_api_lists_the_templates_of_a_run(templates_server: tuple[Server, str, Path]) -> None:
    server, rid, db = templates_server
    got = server.json(f"/api/runs/{rid}/templates")
    con = sqlite3.connect(db)
    assert sorted(t["id"] for t in got["templates"]) == sorted(r[0] for r in con.execute("SELECT id FROM prompt_templates"))
    hostile = next(t for t in got["templates"] if t["id"] == "hostile")
    assert hostile["text"] == HOSTILE and hostile["status"] == "invalid" and hostile["depth"] == 1
    assert sum(len(t["programs"]) for t in got["templates"]) == 10
