"""``qdevolve run examples/agents`` from the command line: offline, and its summary gives the verdict."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def test_the_agents_example_runs_offline_and_its_summary_says_whether_the_best_agent_beats_the_seed(
        tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    db = tmp_path / "agents.sqlite"
    proc = subprocess.run([sys.executable, "-m", "qdevolve", "run", str(ROOT / "examples" / "agents"),
                           "--db", str(db), "--iterations", "2", "--no-progress"],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = " ".join(proc.stdout.split())
    assert "held-out" in out
    assert ("beats the seed agent on the held-out tasks" in out) or ("did not beat the seed agent" in out)
    resumed = subprocess.run([sys.executable, "-m", "qdevolve", "resume", "--db", str(db), "--iterations", "3",
                              "--no-progress"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "4 (budget 3 children + seed)" in " ".join(resumed.stdout.split())
