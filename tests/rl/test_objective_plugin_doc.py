"""docs/plugins.md's worked objective: the page's own code block, as a formula and through the CLI.

``qdevolve train --plugin FILE --objective NAME`` trains with it; one ``eval-policy`` call
compares it with a GRPO run (their shared base scored once), writes JSON and stores the
results with the versions."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from qdevolve import registry
from qdevolve.db.store import open_store
from qdevolve.rl.group import RolloutGroup

DOCS = Path(__file__).resolve().parents[2] / "docs" / "plugins.md"
SMALL = ["--sft-steps", "20", "--prompts-per-step", "2", "--group-size", "4"]


def _doc_objective() -> str:
    section = DOCS.read_text().split("## 5. An RL objective", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_doc_objective_is_rloo_with_a_uniqueness_bonus(tmp_path: Path) -> None:
    path = tmp_path / "rloo_unique.py"
    path.write_text(_doc_objective())
    with registry.snapshot():
        registry.load_plugin_file(path)
        obj = registry.objective.create({"type": "rloo_unique", "beta": 0.5})
        g = RolloutGroup(rewards=[1.0, 1.0, 1.0, 0.0], outcome_keys=["a", "a", "b", "c"])
        shaped = np.array([1.0, 1.0, 1.5, 0.0])  # "b" is correct and unique; "c" is unique but wrong
        expected = shaped - (shaped.sum() - shaped) / 3
        assert np.allclose(obj.advantages(g), expected)
        assert np.allclose(obj.advantages(RolloutGroup(rewards=[1.0], outcome_keys=["a"])), [0.0])
        with pytest.raises(ValueError, match="rloo_unique.*outcome_keys"):
            obj.advantages(RolloutGroup(rewards=[1.0, 0.0]))


def _qd(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "qdevolve", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=600)


@pytest.mark.slow
def test_plugin_objective_trains_and_is_compared_with_grpo_in_one_call(tmp_path: Path) -> None:
    plugin, db, cache = tmp_path / "rloo_unique.py", tmp_path / "rl.sqlite", tmp_path / "cache"
    plugin.write_text(_doc_objective())
    common = ["--task", "few_answer", "--steps", "2", "--db", str(db), "--cache-dir", str(cache), *SMALL]
    r = _qd("train", "--plugin", str(plugin), "--objective", "rloo_unique", "--objective-arg", "beta=0.5",
            "--run-id", "rloo", *common, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    g = _qd("train", "--objective", "grpo", "--run-id", "grpo", *common, cwd=tmp_path)
    assert g.returncode == 0, g.stderr
    missing = _qd("train", "--objective", "rloo_unique", "--run-id", "x", *common, cwd=tmp_path)
    assert missing.returncode == 2 and "rloo_unique" in missing.stderr
    out = tmp_path / "compare.json"
    e = _qd("eval-policy", "--task", "few_answer", "--db", str(db), "--run-id", "rloo", "--run-id", "grpo",
            "--n", "16", "--k", "1,4,16", "--json", str(out), cwd=tmp_path)
    assert e.returncode == 0, e.stderr
    report = json.loads(out.read_text())
    rows = [(v["run_id"], v["version"], v["objective"], bool(v.get("base"))) for v in report["versions"]]
    assert rows == [("rloo", 0, "rloo_unique", True), ("rloo", 1, "rloo_unique", False), ("grpo", 1, "grpo", False)]
    assert report["versions"][2]["base_run_id"] == "rloo"  # the same base model: scored once, for both runs
    for v in report["versions"]:
        assert {"pass@1", "pass@16", "D_16", "effective_outcomes"} <= set(v["metrics"])
    assert "prompts_lost" in report["versions"][1]["metrics"]
    assert "rloo_unique" in e.stdout and "grpo" in e.stdout
    store = open_store(db)
    assert {r["id"]: r["status"] for r in store.list_runs()} == {"rloo": "finished", "grpo": "finished"}
    stored = store.policy_versions("grpo")[1]["metrics"]["evals"][report["key"]]
    assert stored["metrics"] == report["versions"][2]["metrics"]
    assert not store.policy_versions("grpo")[0]["metrics"].get("evals")  # its base was scored as rloo's v0
