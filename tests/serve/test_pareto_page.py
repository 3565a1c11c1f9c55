"""The archive page of a two-objective run in a real headless Chromium: a scatter of the two
objectives with the Pareto front highlighted, each point a link to its program's page."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .chromium import Chromium, Page
from .conftest import ROOT, Server, run_id_of

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def pareto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    db = tmp_path_factory.mktemp("serve-pareto") / "pareto.sqlite"
    proc = subprocess.run([sys.executable, "-m", "qdevolve", "run", str(ROOT / "examples" / "pareto_sine"),
                           "--iterations", "16", "--workers", "1", "--seed", "2", "--no-progress", "--db", str(db)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    s = Server(db)
    yield s, run_id_of(db)
    s.stop()


@pytest.fixture
def page(browser: Chromium) -> Iterator[Page]:
    p = browser.new_page()
    yield p
    p.close()


def _click(page: Page, x: float, y: float) -> None:
    for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
        page.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1})


@pytest.mark.slow
def test_front_scatter_highlights_the_front_and_links_programs(page: Page, pareto_server: tuple[Server, Any]) -> None:
    server, rid = pareto_server
    api = server.json(f"/api/runs/{rid}/archive")["pareto"]
    assert api["objectives"] == {"accuracy": "max", "length": "min"} and api["axes"] == ["accuracy", "length"]
    front = [p for p in api["points"] if p["front"]]
    assert len(front) == api["n_front"] >= 2 and all(p["member"] for p in front)
    assert len(api["points"]) > len(front), "programs off the front are drawn too"

    page.navigate(f"{server.url}/runs/{rid}/archive", wait_for="document.body.dataset.paretoFront")
    assert page.evaluate("document.getElementById('pareto-card').hidden") is False
    assert int(page.evaluate("document.body.dataset.paretoFront")) == api["n_front"]
    assert int(page.evaluate("document.body.dataset.paretoPoints")) == len(api["points"])
    assert page.evaluate("document.querySelector('#pareto canvas') !== null")
    summary = page.evaluate("document.getElementById('pareto-summary').textContent")
    assert f"{api['n_front']} programs on the front" in summary and "length min" in summary
    # the front series holds exactly the front, in accuracy order
    series = page.evaluate("echarts.getInstanceByDom(document.getElementById('pareto')).getOption().series"
                           ".map(s => s.data.map(d => d.point.program_id))")
    assert sorted(series[1]) == sorted(p["program_id"] for p in front)
    assert set(series[0]).isdisjoint(series[1])

    # a real click on a front point opens that program's page
    target = front[0]
    x, y = page.evaluate(
        "(() => { const c = echarts.getInstanceByDom(document.getElementById('pareto'));"
        f" const px = c.convertToPixel({{seriesIndex: 1}}, [{target['objectives']['accuracy']!r}, "
        f"{target['objectives']['length']!r}]);"
        " const r = document.getElementById('pareto').getBoundingClientRect();"
        " window.scrollTo(0, r.top + window.scrollY - 40);"
        " const r2 = document.getElementById('pareto').getBoundingClientRect();"
        " return [r2.left + px[0], r2.top + px[1]]; })()")
    _click(page, x, y)
    page.wait_for("location.pathname.startsWith('/programs/') && document.body.dataset.programReady")
    assert page.evaluate("location.pathname") == f"/programs/{target['program_id']}"
    log = page.console()
    assert not [m for m in log if "Content Security Policy" in m or "Uncaught" in m], log


def test_crafted_objectives_and_metrics_leave_points_or_the_chart_out(tmp_path: Path) -> None:
    import json
    import time
    import uuid

    from sqlalchemy import insert

    from qdevolve.db import schema as S
    from qdevolve.serve.db import ReadOnlyDB
    from qdevolve.serve.front_view import front_view

    from . import synth

    path = tmp_path / "crafted.sqlite"
    eng = synth.new_database(path)
    rid = uuid.uuid4().hex
    with eng.begin() as con:
        con.execute(insert(S.runs).values(id=rid, name="crafted", status="finished", config=json.dumps({}),
                                          created_at=time.time(), updated_at=time.time()))
    good = [synth.add_program(eng, rid, code=f"x = {i}\n", metrics={"a": a, "b": b})
            for i, (a, b) in enumerate([(1.0, 1.0), (2.0, 3.0), (3.0, 2.0)])]
    synth.add_program(eng, rid, code="y = 1\n", metrics={"a": "NaN", "b": 1.0})  # text: left out
    synth.add_program(eng, rid, code="y = 2\n", metrics=["not", "a", "dict"])
    synth.add_program(eng, rid, code="y = 3\n", metrics={"a": 9.0})  # b missing: left out
    eng.dispose()
    db = ReadOnlyDB(str(path))
    view = front_view(db, rid, {"objectives": {"a": "max", "b": "max"}}, set(good))
    assert sorted(p["program_id"] for p in view["points"]) == sorted(good)
    assert {p["program_id"] for p in view["points"] if p["front"]} == {good[1], good[2]}
    assert view["n_front"] == 2 and view["n_members"] == 3
    for bad in ({"a": "up"}, ["a", "b"], {}, {"a": "max", 3: "min"}, None):
        assert front_view(db, rid, {"objectives": bad}, set(good)) is None
