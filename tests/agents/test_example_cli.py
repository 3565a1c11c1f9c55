"""``qdevolve run examples/agents`` from the command line: offline, and its summary gives the verdict."""

from __future__ import annotations

import os
import re
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
    out = _row(proc.stdout, "held-out")
    # the best agent minus the seed agent, over repeated draws of each, with its interval
    assert re.search(r"best − seed agent: [+-]\d\.\d{4}, 90 % interval \[[+-]\d\.\d{4}, [+-]\d\.\d{4}\] "
                     r"over 6 draws each: (within|beyond) noise \(best \d\.\d{4}, seed \d\.\d{4}; mean "
                     r"normalised improvement on line_fit, wave_fit\)", out), out
    lo, hi = map(float, re.search(r"interval \[(\S+), (\S+)\]", out).groups())
    assert ("within noise" in out) == (lo <= 0 <= hi)
    assert "%)" not in _row(proc.stdout, "gain over seed")  # no percentage of a near-zero seed score
    resumed = subprocess.run([sys.executable, "-m", "qdevolve", "resume", "--db", str(db), "--iterations", "3",
                              "--no-progress"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "4 (budget 3 children + seed)" in " ".join(resumed.stdout.split())


def _row(stdout: str, what: str) -> str:
    """A summary table row's value, its wrapped lines joined."""
    out, on = [], False
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip("│┃ ").split("│")] if "│" in line else None
        if not cells or len(cells) < 2:
            on = False
            continue
        if cells[0] == what:
            on = True
        elif cells[0]:
            on = False
        if on:
            out.append(cells[1])
    return " ".join(out)


def test_iterations_0_scores_the_seed_agent_alone_on_the_heldout_tasks(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    proc = subprocess.run([sys.executable, "-m", "qdevolve", "run", str(ROOT / "examples" / "agents"),
                           "--db", str(tmp_path / "seed.sqlite"), "--iterations", "0", "--no-progress"],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = _row(proc.stdout, "held-out")
    assert re.fullmatch(r"seed agent alone \(no child agent evaluated\): held-out \d\.\d{4}, 90 % interval "
                        r"\[\d\.\d{4}, \d\.\d{4}\] over 6 draws \(mean normalised improvement on line_fit, "
                        r"wave_fit\)", out), out
    assert "1 (budget 0 children + seed)" in proc.stdout
