"""Token, cost and wall-time budgets stop a run cleanly; usage per model is stored."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from qdevolve.db import LineageStore
from qdevolve.errors import ConfigError
from qdevolve.evolve.core.engine import Evolution
from qdevolve.evolve.setup.budget import BudgetMeter, parse_budget
from qdevolve.evolve.setup.example import load_example
from qdevolve.testing.scripted_server import ScriptedServer
from qdevolve.testing.scripts import ScriptedModel

ROOT = Path(__file__).resolve().parents[2]
CIRCLES = ROOT / "examples" / "circle_packing"


def _run(tmp_path: Path, url: str, budget: dict, iterations: int = 40) -> tuple[Evolution, sqlite3.Connection]:
    ex = load_example(CIRCLES)
    cfg = ex.config.with_overrides(iterations=iterations, workers=1, max_pending=1, sandbox={"type": "local"},
                                   backend={"type": "openai", "api_base": url, "model": "scripted"},
                                   mutation=[{"type": "diff", "weight": 1.0}],
                                   budget=parse_budget(budget))
    store = LineageStore(tmp_path / "b.sqlite", create=True)
    evo = Evolution.start(ex, cfg, store, progress=False)
    try:
        evo.summary_ = evo.run()
    finally:
        evo.close()
        store.close()
    return evo, sqlite3.connect(tmp_path / "b.sqlite")


def test_cost_budget_stops_cleanly_and_usage_is_stored(tmp_path: Path) -> None:
    with ScriptedServer(ScriptedModel(seed=0)) as server:
        evo, con = _run(tmp_path, server.url, {"max_cost": 0.05,
                                               "prices": {"scripted": {"input": 10.0, "output": 30.0}}})
    s = evo.summary_
    assert s.stop_reason.startswith("cost budget reached"), s.stop_reason
    children = con.execute("SELECT COUNT(*) FROM programs WHERE operator != 'seed'").fetchone()[0]
    assert 0 < children < 40
    status = con.execute("SELECT status FROM runs").fetchone()[0]
    assert status == "stopped", "a budget stop leaves a resumable run"
    usage = s.stats["usage"]
    m = usage["models"]["scripted"]
    # Every completion counts, also those whose child was a duplicate (not stored).
    assert m["calls"] >= children
    prompt_t, completion_t = con.execute(
        "SELECT SUM(prompt_tokens), SUM(completion_tokens) FROM rollouts").fetchone()
    assert m["prompt_tokens"] >= prompt_t > 0 and m["completion_tokens"] >= completion_t > 0
    assert usage["cost"] == pytest.approx((m["prompt_tokens"] * 10.0 + m["completion_tokens"] * 30.0) / 1e6)
    assert usage["cost"] >= 0.05
    stored = [json.loads(v) for (k, v) in con.execute("SELECT key, value FROM run_state") if k == "usage"]
    assert stored and stored[0]["models"]["scripted"]["calls"] >= children
    listed = subprocess.run([sys.executable, "-m", "qdevolve", "runs", "list", "--db", str(tmp_path / "b.sqlite"),
                             "--json"], capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    row = json.loads(listed.stdout)[0]
    assert row["tokens"] == stored[0]["tokens"] > 0 and row["cost"] == pytest.approx(stored[0]["cost"])

def test_token_budget(tmp_path: Path) -> None:
    with ScriptedServer(ScriptedModel(seed=1)) as server:
        evo, _ = _run(tmp_path, server.url, {"max_tokens": 3000})
    assert evo.summary_.stop_reason.startswith("token budget reached")
    assert evo.budget.tokens >= 3000


def test_meter_accounting_and_restore() -> None:
    meter = BudgetMeter.from_config({"max_tokens": 100, "prices": {"m": {"input": 1.0, "output": 2.0}}})
    meter.observe("m", 10, 20)
    meter.observe("free-local-model", 30, 30)
    assert meter.cost == pytest.approx((10 * 1 + 20 * 2) / 1e6), "an unpriced model costs 0"
    assert meter.exceeded() is None
    restored = BudgetMeter.from_config({"max_tokens": 100}, meter.state())
    assert restored.tokens == 90
    restored.observe("m", 5, 5)
    assert "token budget" in restored.exceeded()
    wall = BudgetMeter.from_config({"max_wall_time": 5.0})
    assert wall.exceeded(now=wall.started + 6.0).startswith("wall-time budget")


@pytest.mark.parametrize("bad", [{"max_cost": -1}, {"max_tokens": 0.5}, {"max_wall_time": float("inf")},
                                 {"prices": {"m": {"input": -1}}}, {"max_dollars": 3}])
def test_bad_budget(bad: dict) -> None:
    with pytest.raises(ConfigError, match="budget"):
        parse_budget(bad, where="config.yaml")
