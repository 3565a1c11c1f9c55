"""The JSON API and the server's guarantees, over HTTP against a real ``qdevolve serve`` process."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from qdevolve.db import display_target
from qdevolve.serve.db import ReadOnlyDB

from . import synth
from .conftest import Server, copy_db, run_id_of


def _check_tree(tree: dict[str, Any]) -> None:
    ids = {n["id"] for n in tree["nodes"]}
    roots = [n for n in tree["nodes"] if n["parent"] is None]
    assert all(n["parent"] in ids for n in tree["nodes"] if n["parent"] is not None)
    assert len(roots) >= 1
    drawn_plus_hidden = len(tree["nodes"]) + sum(n["hidden"] for n in roots)
    assert drawn_plus_hidden == tree["in_scope"], "every program is drawn or counted hidden under a root"


@pytest.mark.slow
def test_runs_and_tree_of_a_real_run(server: Server, view_db: dict[str, Any], run_db: Path) -> None:
    runs = server.json("/api/runs")["runs"]
    assert [r["id"] for r in runs] == [view_db["run_id"]]
    n_real = sqlite3.connect(run_db).execute("SELECT COUNT(*) FROM programs").fetchone()[0]
    assert runs[0]["programs"] == n_real + 1 + 12 >= 13
    tree = server.json(f"/api/runs/{view_db['run_id'][:8]}/tree")
    assert tree["shown"] == tree["total"] == runs[0]["programs"]
    _check_tree(tree)
    best = [n for n in tree["nodes"] if n["best"]]
    assert len(best) == 1 and best[0]["score"] == max(n["score"] for n in tree["nodes"] if n["status"] == "ok")
    path = [n for n in tree["nodes"] if n["best_path"]]
    assert path[0]["parent"] is None and path[-1]["best"]
    hostile = next(n for n in tree["nodes"] if n["id"] == view_db["hostile"])
    assert hostile["status"] == "error" and "<img" in hostile["op"]


def test_tree_aggregates_a_large_run_and_filters(tmp_path: Path) -> None:
    db = tmp_path / "big.sqlite"
    run_id = synth.synthetic_run(db, 3000, seed=3)
    s = Server(db)
    try:
        tree = s.json(f"/api/runs/{run_id}/tree?limit=200")
        assert tree["total"] == 3000 and tree["shown"] <= 200 and tree["truncated"]
        _check_tree(tree)
        assert any(n["best"] for n in tree["nodes"]) and any(n["hidden"] > 0 for n in tree["nodes"])
        failed = s.json(f"/api/runs/{run_id}/tree?limit=300&status=failed")
        assert failed["matching"] < 3000
        assert all(n["status"] not in ("ok", None) for n in failed["nodes"] if not n["context"])
        gen = s.json(f"/api/runs/{run_id}/tree?gen_min=3&gen_max=4&operator=ast,diff")
        assert all(3 <= n["gen"] <= 4 and n["op"] in ("ast", "diff") for n in gen["nodes"] if not n["context"])
        focus_id = max(tree["nodes"], key=lambda n: n["hidden"])["id"]
        focus = s.json(f"/api/runs/{run_id}/tree?root={focus_id[:10]}&limit=100")
        assert focus["root"] == focus_id and [n for n in focus["nodes"] if n["parent"] is None][0]["id"] == focus_id
        _check_tree(focus)
        status, _, body = s.get(f"/api/runs/{run_id}/tree?limit=abc")
        assert status == 400 and b"limit" in body
    finally:
        s.stop()


def test_program_archive_policy_endpoints(server: Server, view_db: dict[str, Any]) -> None:
    p = server.json(f"/api/programs/{view_db['hostile']}")
    assert p["evaluations"][0]["status"] == "error" and "<script>" in p["code"]
    assert p["parents"] and p["ancestors"] and len(p["children"]) == 3 and p["rollouts"][0]["completion"].startswith("reply")
    arc = server.json(f"/api/runs/{view_db['run_id']}/archive")
    assert arc["feature_dimensions"] == ["mean_distance", "spread"] and arc["n_elites"] >= 1
    assert arc["grid"]["labels"][0][0].startswith("0") and arc["grid"]["ranges"] == [[0.0, 10.0], [0.0, 10.0]]
    assert arc["best_curve"] and arc["qd_curve"][-1][1] == pytest.approx(sum(e["score"] for e in arc["elites"]))
    pol = server.json(f"/api/runs/{view_db['run_id']}/policy")
    assert [v["version"] for v in pol["versions"]] == [0, 1, 2]
    assert [v["pass@1"] for v in pol["versions"]] == [0.25, 0.5, 0.75]  # rewards >= 1.0 among 4 rollouts
    assert [v["programs"] for v in pol["versions"]] == [4, 4, 4] and pol["versions"][2]["D_n"] == 3.0


def test_errors_headers_and_host_check(server: Server) -> None:
    status, headers, body = server.get("/api/programs/0000ffff")
    assert status == 404 and json.loads(body)["error"].startswith("program")
    status, headers, body = server.get("/programs/<script>")
    assert status == 404 and b"<script>" not in body and b"&lt;script&gt;" in body
    csp = headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert headers["x-content-type-options"] == "nosniff"
    status, _, _ = server.get("/api", headers={"Host": "attacker.example"})
    assert status == 400, "a loopback server refuses foreign Host headers (DNS rebinding)"


def test_database_is_opened_read_only(tmp_path: Path, run_db: Path) -> None:
    db = copy_db(run_db, tmp_path)
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    ro = ReadOnlyDB(str(db))
    with pytest.raises(Exception, match="readonly|read-only|attempt to write"):
        with ro.engine.begin() as con:
            con.exec_driver_sql("DELETE FROM programs")
    ro.close()
    s = Server(db)
    try:
        assert s.json("/api/runs")["runs"]
    finally:
        s.stop()
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


def test_missing_tables_and_unknown_columns(tmp_path: Path, run_db: Path) -> None:
    db = copy_db(run_db, tmp_path)
    con = sqlite3.connect(db)
    cols = {r[1] for r in con.execute("PRAGMA table_info(evaluations)")}
    if "worker" not in cols:  # a database written before evaluations.worker existed
        con.execute("ALTER TABLE evaluations ADD COLUMN worker TEXT")
    con.executescript("DROP TABLE policy_versions; DROP TABLE rollouts;"
                      "ALTER TABLE evaluations ADD COLUMN from_a_newer_version TEXT;"
                      "UPDATE evaluations SET worker = 'node-7', from_a_newer_version = 'x';")
    con.commit()
    pid = con.execute("SELECT id FROM programs ORDER BY seq LIMIT 1").fetchone()[0]
    con.close()
    s = Server(db)
    try:
        rid = run_id_of(db)
        assert s.json(f"/api/runs/{rid}/policy")["versions"] == []
        assert s.json(f"/api/programs/{pid}")["evaluations"][0]["worker"] == "node-7"
        status, _, body = s.get(f"/programs/{pid}")
        assert status == 200 and b"node-7" in body
        for page in (f"/runs/{rid}", f"/runs/{rid}/archive", f"/runs/{rid}/policy"):
            assert s.get(page)[0] == 200
    finally:
        s.stop()


@pytest.mark.slow
def test_cli_masks_password_and_warns_on_public_host(tmp_path: Path, run_db: Path) -> None:
    url = "postgresql+psycopg://viewer:s3cret-pw@127.0.0.1:1/nowhere"
    assert "s3cret-pw" not in display_target(url) and "***" in display_target(url)
    proc = subprocess.run([sys.executable, "-m", "qdevolve", "serve", "--db", url, "--port", "0"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "s3cret-pw" not in proc.stdout + proc.stderr
    assert proc.stderr.startswith("error: postgresql+psycopg://viewer:***@127.0.0.1:1/nowhere")
    bad = tmp_path / "notes.txt"
    bad.write_text("hello")
    proc = subprocess.run([sys.executable, "-m", "qdevolve", "serve", "--db", str(bad)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2 and "not a SQLite file" in proc.stderr
    s = Server(None, env={"QDEVOLVE_DB": str(run_db)})  # the database from the environment
    try:
        assert s.json("/api/runs")["database"] == str(run_db)
    finally:
        s.stop()
    s = Server(run_db, "--host", "0.0.0.0")
    try:
        s.proc.terminate()
        s.proc.wait(timeout=10)
        assert "warning: serving on 0.0.0.0" in s.proc.stderr.read()
    finally:
        s.stop()


@pytest.mark.slow
def test_refuses_to_start_without_its_pinned_assets(tmp_path: Path, run_db: Path) -> None:
    from qdevolve.serve.assets import ASSETS, vendor_dir

    empty = tmp_path / "vendor"
    empty.mkdir()
    env = {**os.environ, "QDEVOLVE_SERVE_VENDOR": str(empty)}
    proc = subprocess.run([sys.executable, "-m", "qdevolve", "serve", "--db", str(run_db)], capture_output=True,
                          text=True, timeout=60, env=env)
    assert proc.returncode == 2 and "python -m qdevolve.serve.assets" in proc.stderr
    for a in ASSETS:  # a copy with one byte changed is refused too
        data = (vendor_dir() / a.name).read_bytes()
        (empty / a.name).write_bytes(data if a.name != "echarts.min.js" else data[:-1] + b" ")
    proc = subprocess.run([sys.executable, "-m", "qdevolve", "serve", "--db", str(run_db)], capture_output=True,
                          text=True, timeout=60, env=env)
    assert proc.returncode == 2 and "echarts.min.js missing or altered" in proc.stderr
