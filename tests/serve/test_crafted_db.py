"""``qdevolve serve`` over a crafted database: refused on open, or every page and API answer is a
clear error (never a 500 traceback, never a dead server)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from qdevolve.errors import DatabaseError
from qdevolve.serve import create_app
from qdevolve.serve.app import warm_up

from . import synth

REFUSED = {
    "view": "CREATE VIEW forever AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT x FROM r",
    "trigger": "CREATE TRIGGER t AFTER INSERT ON programs BEGIN DELETE FROM programs; END",
    "missing_column": "ALTER TABLE evaluations DROP COLUMN score",
}
DATA = {
    "text_score": "UPDATE evaluations SET score = 'not a number'",
    "blob_score": "UPDATE evaluations SET score = x'00ff'",
    "text_generation": "UPDATE programs SET generation = 'g', island = 'i', policy_version = 'v'",
    "bad_json": "UPDATE evaluations SET metrics = '{not json', features = '[1,', tests = 'x', artifacts = '{'",
    "bad_config": "UPDATE runs SET config = '[1, 2'",
    "config_not_a_mapping": "UPDATE runs SET config = '\"text\"'",
    "bad_cell": "UPDATE archive_events SET cell = '{\"a\": [[[[', data = 'nope', score = 'high'",
}


def _crafted(tmp_path: Path, sql: str) -> tuple[Path, str, str]:
    path = tmp_path / "crafted.sqlite"
    rid = synth.synthetic_run(path, 40)
    con = sqlite3.connect(path)
    pid = con.execute("SELECT id FROM programs ORDER BY seq DESC LIMIT 1").fetchone()[0]
    con.executescript(sql)
    con.commit()
    con.close()
    return path, rid, pid


@pytest.mark.parametrize("craft", sorted(REFUSED))
def test_crafted_schema_is_refused_on_open(craft: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    path, _rid, _pid = _crafted(tmp_path, REFUSED[craft])
    with pytest.raises(DatabaseError):
        create_app(str(path), warm=False)
    from qdevolve.cli import main

    with pytest.raises(SystemExit) as info:
        main(["serve", "--db", str(path), "--port", "0"])
    err = capfd.readouterr().err.strip().splitlines()
    assert info.value.code == 2 and len(err) == 1 and err[0].startswith("error:"), err


@pytest.mark.parametrize("craft", sorted(DATA))
def test_every_page_answers_crafted_values_without_a_500(craft: str, tmp_path: Path) -> None:
    path, rid, pid = _crafted(tmp_path, DATA[craft])
    app = create_app(str(path), warm=False)
    try:
        warm_up(app)  # the server's start: a text score must not stop it
        client = TestClient(app, raise_server_exceptions=False)
        for url in ["/", f"/runs/{rid}", f"/runs/{rid}/archive", f"/runs/{rid}/policy", f"/programs/{pid}",
                    "/api/runs", f"/api/runs/{rid}", f"/api/runs/{rid}/tree", f"/api/runs/{rid}/archive",
                    f"/api/runs/{rid}/policy", f"/api/programs/{pid}", f"/api/runs/{rid}/stamp",
                    f"/api/programs/{pid}/live"]:
            r = client.get(url)
            assert r.status_code < 500 or r.status_code == 503, (craft, url, r.status_code, r.text[:300])
            if r.status_code >= 400 and url.startswith("/api"):
                assert "error" in r.json() and "\n" not in r.json()["error"], (craft, url, r.text[:300])
            if r.status_code >= 400:
                assert "Traceback" not in r.text
    finally:
        app.state.db.close()


def test_text_scores_show_as_no_score_in_the_tree(tmp_path: Path) -> None:
    path, rid, _pid = _crafted(tmp_path, DATA["text_score"])
    app = create_app(str(path), warm=False)
    try:
        r = TestClient(app).get(f"/api/runs/{rid}/tree")
        assert r.status_code == 200
    finally:
        app.state.db.close()
