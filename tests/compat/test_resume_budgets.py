"""``qdevolve resume`` raises the token, cost, wall-time and child budgets of a run that one of
them stopped (real ``qdevolve`` processes against the scripted OpenAI-compatible server);
bad values are one line, exit 2, and change nothing."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from qdevolve.testing.scripted_server import ScriptedServer
from qdevolve.testing.scripts import ScriptedModel

from .conftest import QDEVOLVE

SEED = '''# EVOLVE-BLOCK-START
A = 0.5
B = 2.0
# EVOLVE-BLOCK-END


def values():
    return [A, B]
'''

EVALUATOR = '''import importlib.util
import time


def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("cand", program_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    a, b = mod.values()
    time.sleep({sleep})
    return {{"combined_score": 1.0 / (1.0 + (a - 3) ** 2 + (b + 1) ** 2), "features": {{"a": a, "b": b}}}}
'''

CONFIG = '''run: {{iterations: 12, seed: 5, workers: 1, max_pending: 1}}
archive:
  type: map_elites
  feature_dimensions: [a, b]
  ranges: [[-5, 5], [-5, 5]]
  bins: 6
sandbox: {{type: local}}
limits: {{wall_s: 20}}
mutation: [{{type: rewrite}}]
backend: {{type: openai, api_base: "{url}", model: scripted}}
budget:
  prices: {{scripted: {{input: 100.0, output: 300.0}}}}
'''


def _example(root: Path, url: str, sleep: float = 0.0) -> Path:
    root.mkdir(parents=True)
    (root / "initial_program.py").write_text(SEED)
    (root / "evaluator.py").write_text(EVALUATOR.format(sleep=sleep))
    (root / "config.yaml").write_text(CONFIG.format(url=url))
    return root


def _qd(*args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    trusted = {"run": ["--trust", "backend.api_base,sandbox.type"],  # the scripted server, the local sandbox
               "resume": ["--trust", "backend.api_base"]}.get(args[0], [])
    r = subprocess.run([*QDEVOLVE, *args, *trusted, "--no-progress"], capture_output=True, text=True, timeout=300)
    if ok:
        assert r.returncode == 0, r.stderr[-3000:]
    return r


def _run_row(db: Path) -> tuple[str, dict[str, Any], int]:
    con = sqlite3.connect(db)
    try:
        status, cfg = con.execute("SELECT status, config FROM runs").fetchone()
        children = con.execute("SELECT COUNT(*) FROM programs WHERE operator != 'seed'").fetchone()[0]
        return status, json.loads(cfg), children
    finally:
        con.close()


def _usage(db: Path) -> dict[str, Any]:
    con = sqlite3.connect(db)
    try:
        return json.loads(con.execute("SELECT value FROM run_state WHERE key = 'usage'").fetchone()[0])
    finally:
        con.close()


def _refused(db: Path, *args: str, match: str) -> None:
    before = _run_row(db)
    r = _qd("resume", "--db", str(db), *args, ok=False)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and match in lines[0], r.stderr
    assert _run_row(db) == before, "a refused value changes nothing"


@pytest.mark.slow
def test_resume_raises_a_token_budget_then_a_cost_budget(tmp_path: Path) -> None:
    db = tmp_path / "t.sqlite"
    with ScriptedServer(ScriptedModel(seed=0)) as server:
        ex = _example(tmp_path / "ex", server.url)
        r = _qd("run", str(ex), "--db", str(db), "--max-tokens", "900")
        assert "token budget reached" in r.stdout, r.stdout
        status, cfg, children = _run_row(db)
        assert status == "stopped" and 0 < children < 12 and cfg["budget"]["max_tokens"] == 900
        assert _usage(db)["tokens"] >= 900

        _refused(db, "--max-tokens", "0", match="--max-tokens")
        _refused(db, "--max-tokens", "lots", match="--max-tokens")
        _refused(db, "--max-cost", "-1", match="--max-cost")
        _refused(db, "--max-wall-time", "nan", match="--max-wall-time")
        _refused(db, "--wall-time", "0", match="--wall-time")

        r = _qd("resume", "--db", str(db))  # the same budget: stops again at once, nothing new
        assert "token budget reached" in r.stdout
        assert _run_row(db)[2] == children

        # A larger token budget, but a cost budget (priced in config.yaml) that stops it again.
        cost_now = _usage(db)["cost"]
        r = _qd("resume", "--db", str(db), "--max-tokens", "1e7", "--max-cost", f"{cost_now + 0.2:.6f}")
        assert "cost budget reached" in r.stdout, r.stdout
        status, cfg, more = _run_row(db)
        assert status == "stopped" and children < more < 12
        assert cfg["budget"]["max_tokens"] == 10_000_000
        assert cfg["budget"]["max_cost"] == pytest.approx(cost_now + 0.2)
        assert cfg["budget"]["prices"] == {"scripted": {"input": 100.0, "output": 300.0}}, "prices are kept"

        r = _qd("resume", "--db", str(db), "--max-cost", "1000", "--iterations", "14")
        status, cfg, final = _run_row(db)
        assert status == "finished" and final == 14, r.stdout
        assert cfg["budget"] == {"max_tokens": 10_000_000, "max_cost": 1000.0,
                                 "prices": {"scripted": {"input": 100.0, "output": 300.0}}}
    runs = subprocess.run([*QDEVOLVE, "runs", "list", "--db", str(db)], capture_output=True, text=True, timeout=60)
    assert runs.returncode == 0 and "finished" in runs.stdout, runs.stderr


@pytest.mark.slow
def test_resume_raises_a_wall_time_budget(tmp_path: Path) -> None:
    db = tmp_path / "w.sqlite"
    with ScriptedServer(ScriptedModel(seed=1)) as server:
        ex = _example(tmp_path / "ex", server.url, sleep=0.4)
        r = _qd("run", str(ex), "--db", str(db), "--max-wall-time", "1.5")
        assert "wall-time budget reached" in r.stdout, r.stdout
        status, cfg, children = _run_row(db)
        assert status == "stopped" and children < 12 and cfg["budget"]["max_wall_time"] == 1.5
        r = _qd("resume", "--db", str(db), "--max-wall-time", "600", "--wall-time", "900")
        status, cfg, final = _run_row(db)
        assert status == "finished" and final == 12, r.stdout
        assert cfg["budget"]["max_wall_time"] == 600.0 and cfg["wall_time_s"] == 900.0


@pytest.mark.parametrize("args", [["--max-tokens", "-3"], ["--max-cost", "inf"], ["--max-wall-time", "soon"]])
def test_run_refuses_bad_budget_options_before_anything(tmp_path: Path, args: list[str]) -> None:
    ex = _example(tmp_path / "ex", "http://127.0.0.1:9/v1")
    db = tmp_path / "never.sqlite"
    r = subprocess.run([*QDEVOLVE, "run", str(ex), "--db", str(db), *args], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and args[0] in r.stderr, r.stderr
    assert not db.exists()


def test_a_cost_budget_without_prices_is_warned_about() -> None:
    from qdevolve.evolve.setup.budget import budget_warnings, with_budget_flags

    assert budget_warnings(with_budget_flags(None, {"max_cost": "5"}))[0].startswith("budget.max_cost (5) never")
    priced = with_budget_flags({"prices": {"m": {"input": 1.0, "output": 2.0}}}, {"max_cost": "5"})
    assert budget_warnings(priced) == [] and priced["max_cost"] == 5.0
    assert with_budget_flags(priced, {"max_cost": None}) is priced, "no flag given: the stored budget as it is"
