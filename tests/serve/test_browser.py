"""The viewer in a real headless Chromium (driven over the DevTools protocol pipe).

Each page renders with data under the strict Content-Security-Policy; hostile program text
shows as text and runs nothing; a page updates while the database is written; the tree page's
screenshot is not blank. Skipped, with the reason, only when chromium is not installed.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from . import synth
from .chromium import Chromium, Page
from .conftest import Server, copy_db, run_id_of

pytestmark = pytest.mark.timeout(240)

PWNED = "typeof window.__pwned === 'undefined'"


@pytest.fixture
def page(browser: Chromium) -> Page:
    p = browser.new_page()
    yield p
    p.close()


def _clean(page: Page, server: Server) -> None:
    """Nothing blocked by the CSP, no script error, no request off this server."""
    log = page.console()
    assert not [m for m in log if "Content Security Policy" in m or "Uncaught" in m], log
    foreign = [u for u in page.requests() if not u.startswith(server.url) and not u.startswith("about:")]
    assert foreign == []


@pytest.mark.slow
def test_every_page_renders_with_data(page: Page, server: Server, view_db: dict[str, Any]) -> None:
    rid = view_db["run_id"]
    page.navigate(f"{server.url}/", wait_for="document.body.dataset.treeReady")
    assert int(page.evaluate("document.body.dataset.treeNodes")) == int(page.evaluate("document.body.dataset.treePrograms")) >= 13
    assert page.evaluate("document.querySelectorAll('#runs tbody tr').length") == 1
    assert page.evaluate("document.querySelector('#tree canvas') !== null")
    assert "best" in page.evaluate("document.getElementById('tree-summary').textContent")

    page.navigate(f"{server.url}/runs/{rid}/archive", wait_for="document.body.dataset.archiveReady")
    assert int(page.evaluate("document.body.dataset.archiveElites")) >= 1
    assert "cells filled" in page.evaluate("document.getElementById('archive-summary').textContent")

    page.navigate(f"{server.url}/runs/{rid}/policy", wait_for="document.body.dataset.policyReady")
    assert page.evaluate("document.querySelectorAll('#versions tbody tr').length") == 3
    assert page.evaluate("document.querySelector('#versions tbody tr:last-child td:nth-child(9)').textContent") == "0.75"

    seed = next(n for n in server.json(f"/api/runs/{rid}/tree")["nodes"] if n["parent"] is None)["id"]
    page.navigate(f"{server.url}/programs/{seed}", wait_for="document.body.dataset.programReady")
    assert "def " in page.evaluate("document.getElementById('code').textContent")
    assert page.evaluate("document.querySelectorAll('#code .hl span').length") > 20, "highlighted"
    assert page.evaluate("document.querySelectorAll('#children li a').length") >= 1
    _clean(page, server)


@pytest.mark.slow
def test_hostile_text_stays_text(page: Page, server: Server, view_db: dict[str, Any]) -> None:
    page.navigate(f"{server.url}/programs/{view_db['hostile']}", wait_for="document.body.dataset.programReady")
    code = page.evaluate("document.getElementById('code').textContent")
    for payload in synth.HOSTILE:
        assert payload in code
    body = page.evaluate("document.querySelector('main').textContent")
    assert "onerror=\"window.__pwned='key'\"" in body and "reply </script><script>" in body
    assert page.evaluate("document.querySelectorAll('main img, main svg, main script').length") == 0
    page.evaluate("new Promise(r => setTimeout(r, 1200))")  # let the live poll run once too
    assert page.evaluate(PWNED)

    page.navigate(f"{server.url}/runs/{view_db['run_id']}?color=op", wait_for="document.body.dataset.treeReady")
    assert "<b>op</b>" in page.evaluate("document.getElementById('legend').textContent")
    ops = page.evaluate("[...document.querySelectorAll('#filters select[name=operator] option')].map(o => o.textContent)")
    assert any("<img src=x" in o for o in ops)
    assert page.evaluate(PWNED)
    assert not [u for u in page.requests() if u.rstrip("/").endswith("/x")], "no image request from a payload"
    _clean(page, server)


@pytest.mark.slow
def test_pages_update_live_while_the_run_writes(page: Page, run_db: Path, tmp_path: Path) -> None:
    db = copy_db(run_db, tmp_path)
    rid = run_id_of(db)
    s = Server(db)
    try:
        page.navigate(f"{s.url}/runs/{rid}", wait_for="document.body.dataset.treeReady")
        before = int(page.evaluate("document.body.dataset.treePrograms"))
        seed = next(n for n in s.json(f"/api/runs/{rid}/tree")["nodes"] if n["parent"] is None)["id"]
        eng = synth.engine(db)
        new = synth.add_program(eng, rid, code="x = 'live'\n", parents=[seed], score=0.1)
        page.wait_for(f"Number(document.body.dataset.treePrograms) === {before + 1}", timeout=30)
        assert page.evaluate("document.querySelector('#runs tbody tr td:nth-child(4)').textContent") == str(before + 1)

        page.navigate(f"{s.url}/programs/{new}", wait_for="document.body.dataset.programReady")
        synth.add_program(eng, rid, code="x = 'grandchild'\n", parents=[new], status=None)
        page.wait_for("Number(document.body.dataset.liveChildren) === 1", timeout=30)
        assert "pending" in page.evaluate("document.getElementById('children').textContent")
        eng.dispose()
        _clean(page, s)
    finally:
        s.stop()


def test_tree_screenshot_is_not_blank(page: Page, server: Server, view_db: dict[str, Any], tmp_path: Path) -> None:
    from PIL import Image

    page.navigate(f"{server.url}/runs/{view_db['run_id']}", wait_for="document.body.dataset.treeReady")
    rect = page.evaluate("(() => { const r = document.getElementById('tree').getBoundingClientRect();"
                         " return [r.left, r.top, r.right, r.bottom].map(Math.round); })()")
    png = page.screenshot(tmp_path / "tree.png")
    img = Image.open(io.BytesIO(png.read_bytes())).convert("RGB")
    chart = img.crop(tuple(rect))
    colours = chart.getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 50, "the tree area holds drawn nodes and edges"
    background = max(colours)[1]
    drawn = sum(n for n, c in colours if sum(abs(a - b) for a, b in zip(c, background, strict=True)) > 60)
    assert drawn > 500, f"only {drawn} pixels differ from the background"


@pytest.mark.slow
def test_empty_database_page_follows_the_first_run(page: Page, tmp_path: Path) -> None:
    from sqlalchemy import insert

    from qdevolve.db import schema as S

    db = tmp_path / "empty.sqlite"
    synth.new_database(db).dispose()
    s = Server(db)
    try:
        page.navigate(s.url + "/", wait_for="document.body.dataset.runsReady === '0'")
        assert "no runs yet" in page.evaluate("document.getElementById('no-runs').textContent")
        eng = synth.engine(db)
        with eng.begin() as con:
            con.execute(insert(S.runs).values(id="run-new", name="new", config="{}", created_at=0.0, updated_at=1.0))
        synth.add_program(eng, "run-new", code="x = 1\n", score=0.5)
        eng.dispose()
        page.wait_for("location.pathname === '/runs/run-new' && document.body.dataset.treeReady", timeout=30)
        _clean(page, s)
    finally:
        s.stop()


def _heat_scale(page: Page, url: str) -> tuple[str, dict[str, Any]]:
    page.navigate(url, wait_for="document.body.dataset.archiveReady")
    caption = page.evaluate("document.getElementById('heat-scale').textContent")
    vm = page.evaluate("(() => { const v = echarts.getInstanceByDom(document.getElementById('heatmap'))"
                       ".getOption().visualMap[0]; return {min: v.min, max: v.max, precision: v.precision,"
                       " text: v.text, calculable: v.calculable}; })()")
    return caption, vm


@pytest.mark.slow
def test_the_heatmap_scale_reads_the_lowest_and_highest_score(page: Page, server: Server,
                                                              view_db: dict[str, Any]) -> None:
    """The colour scale's ends are the filled cells' lowest and highest scores, with decimals
    enough to tell them apart (echarts draws them with ``precision`` decimals: 0 reads "0 ... 0")."""
    rid = view_db["run_id"]
    scores = [c["score"] for c in server.json(f"/api/runs/{rid}/archive")["grid"]["cells"]]
    lo, hi = min(scores), max(scores)
    assert hi > lo
    caption, vm = _heat_scale(page, f"{server.url}/runs/{rid}/archive")
    p = vm["precision"]
    assert round(hi - lo, p) > 0 and 10 ** -p <= (hi - lo) / 10  # the labels resolve the range
    assert caption == f"colour: best score per cell, from {lo:.{p}f} (lowest) to {hi:.{p}f} (highest)", caption
    assert vm["min"] == lo and vm["max"] == hi and vm["text"] == [f"{hi:.{p}f} best", f"score {lo:.{p}f}"]
    _clean(page, server)


@pytest.mark.slow
def test_a_single_filled_cell_is_labelled_as_one_value(page: Page, tmp_path: Path) -> None:
    import subprocess
    import sys

    db = tmp_path / "one.sqlite"
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-m", "qdevolve", "run", str(root / "examples" / "function_minimization"),
                           "--iterations", "0", "--no-progress", "--db", str(db)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    s = Server(db)
    try:
        rid = run_id_of(db)
        (cell,) = s.json(f"/api/runs/{rid}/archive")["grid"]["cells"]
        caption, vm = _heat_scale(page, f"{s.url}/runs/{rid}/archive")
        p = vm["precision"]
        assert caption == f"colour: every filled cell scores {cell['score']:.{p}f}", caption
        assert p >= 3 - len(str(int(abs(cell["score"])))) and vm["calculable"] is False
        assert vm["text"] == ["", f"every cell {cell['score']:.{p}f}"]
        _clean(page, s)
    finally:
        s.stop()


@pytest.mark.slow
def test_where_the_node_limit_cuts_the_tree_a_leaf_says_how_many_are_deeper(page: Page, server: Server,
                                                                           view_db: dict[str, Any]) -> None:
    rid = view_db["run_id"]

    def cut_leaves(limit: int) -> int:
        nodes = server.json(f"/api/runs/{rid}/tree?limit={limit}")["nodes"]
        parents = {n["parent"] for n in nodes}
        return sum(1 for n in nodes if n["id"] not in parents and n["hidden"] > 0)

    limit = next(k for k in range(2, 60) if cut_leaves(k))  # a limit at which a drawn leaf hides descendants
    page.navigate(f"{server.url}/runs/{rid}?limit={limit}", wait_for="document.body.dataset.treeReady")
    cut = page.evaluate("""(() => {
      const out = [];
      const walk = item => {
        const kids = item.children || [];
        if (item.node && !kids.length) out.push([item.node.hidden, item.label ? item.label.formatter : null]);
        kids.forEach(walk);
      };
      echarts.getInstanceByDom(document.getElementById('tree')).getOption().series[0].data.forEach(walk);
      return out;
    })()""")
    assert any(hidden > 0 for hidden, _ in cut), cut  # the limit left descendants out
    for hidden, label in cut:
        if hidden > 0:
            assert label is not None and label.endswith(f"+{hidden} deeper"), cut
        else:
            assert label is None or "deeper" not in label, cut
    _clean(page, server)
