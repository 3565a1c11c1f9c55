"""Agents spend through the run's budget: every token of ``tools.generate`` (scoring and
self-modification) lands on the run's meter under ``agent:<id>``, the budget stops the run,
and the per-spender accounts survive in the run state."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import qdevolve.agents  # noqa: F401  (registers 'self' and 'agents')
from qdevolve.db import LineageStore
from qdevolve.evolve.core import Evolution
from qdevolve.evolve.setup.budget import BudgetMeter, parse_budget
from qdevolve.evolve.setup.example import load_example
from qdevolve.testing.scripted_server import ScriptedServer

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agents"

# A seed agent that asks the model on every call (and returns its parent with a note).
GENERATING_AGENT = '''"""An agent that asks the run's model before each answer."""
# EVOLVE-BLOCK-START
ASKS = 2


def propose(task, parent, feedback, tools):
    for _ in range(ASKS):
        try:
            tools.generate("improve this program:\\n" + parent)
        except Exception:
            break
    return parent + "\\n# asked\\n"
# EVOLVE-BLOCK-END
'''


class Billing:
    """A scripted model that keeps what it billed (the usage its replies report)."""

    def __init__(self) -> None:
        self.requests = 0

    def __call__(self, request: dict) -> str:
        self.requests += 1
        return "def solve():\n    return 7.0\n" + "# padding words to bill\n" * 5


def _example(tmp_path: Path) -> Path:
    ex = tmp_path / "agents_ex"
    shutil.copytree(EXAMPLE, ex)
    (ex / "initial_program.py").write_text(GENERATING_AGENT)
    config = yaml.safe_load((ex / "config.yaml").read_text())
    config["run"].update(iterations=6, workers=1)
    config["run"]["executor_options"].update(tasks={"bowl": {}}, iterations=2, calls=4, wall_s=30)
    config["mutation"] = [{"type": "self", "calls": 4, "evaluations": 1, "wall_s": 60}]
    (ex / "config.yaml").write_text(yaml.safe_dump(config))
    return ex


@pytest.mark.slow
def test_an_agents_run_bills_the_agents_tokens_and_stops_at_the_budget(tmp_path: Path) -> None:
    ex_dir = _example(tmp_path)
    db = tmp_path / "a.sqlite"
    script = Billing()
    with ScriptedServer(script, latency_s=0.0) as server:
        ex = load_example(ex_dir)
        cfg = ex.config.with_overrides(backend={"type": "openai", "api_base": server.url, "model": "scripted"},
                                       sandbox={"type": "local"}, budget=parse_budget({"max_tokens": 300}))
        store = LineageStore(db)
        evo = Evolution.start(ex, cfg, store, progress=False)
        try:
            summary = evo.run()
        finally:
            evo.close()
        billed = script.requests
    assert billed > 0, "the agents asked the model"
    assert summary.stop_reason.startswith("token budget reached"), summary.stop_reason
    usage = store.get_state(summary.run_id, "usage")
    spenders = usage["spenders"]
    agents = {k: v for k, v in spenders.items() if k.startswith("agent:")}
    assert agents, spenders
    agent_tokens = sum(v["prompt_tokens"] + v["completion_tokens"] for v in agents.values())
    assert agent_tokens >= 300 and usage["tokens"] >= 300
    assert sum(v["calls"] for v in spenders.values()) == billed == usage["models"]["scripted"]["calls"]
    assert usage["tokens"] == sum(v["prompt_tokens"] + v["completion_tokens"] for v in spenders.values())
    children = store.count_evaluations(summary.run_id)
    store.close()
    assert children < 1 + 6, "the budget stopped the run before its 6 children"
    # resume keeps the accounts: the meter rebuilt from the run state has the same spenders
    assert BudgetMeter.from_config({"max_tokens": 300}, usage).state()["spenders"] == spenders
    listed = subprocess.run([sys.executable, "-m", "qdevolve", "runs", "list", "--db", str(db), "--json"],
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert "agents " in json.loads(listed.stdout)[0]["spent_by"]
