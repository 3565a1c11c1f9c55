"""A plugin that raises mid-run stops the run with one line (exit 1), marks it failed, and
the run resumes once the cause is gone; nothing stored is lost."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

import pytest

from .conftest import QDEVOLVE

FLAKY_SELECTION = '''
import os
from qdevolve import registry


@registry.selection("flaky_first")
class FlakyFirst:
    """Picks the first candidates; raises after a few calls while BREAK_FILE exists."""

    def __init__(self):
        self.calls = 0

    def select(self, candidates, rng, n=1):
        self.calls += 1
        if self.calls > 3 and os.path.exists(os.environ["BREAK_FILE"]):
            raise RuntimeError("selection store went away")
        return list(candidates[:1]) * n
'''


@pytest.mark.slow
def test_plugin_raising_mid_run_marks_failed_and_resumes(tiny_example: Path, tmp_path: Path) -> None:
    plugin = tmp_path / "flaky.py"
    plugin.write_text(FLAKY_SELECTION)
    brk = tmp_path / "break"
    brk.write_text("1")
    db = tmp_path / "f.sqlite"
    env = {**__import__("os").environ, "BREAK_FILE": str(brk)}
    r = subprocess.run([*QDEVOLVE, "run", str(tiny_example), "--sandbox", "local", "--db", str(db), "--iterations", "12",
                        "--selection", "flaky_first", "--plugin", str(plugin), "--workers", "1", "--no-progress"],
                       capture_output=True, text=True, timeout=180, env=env)
    assert r.returncode == 1, r.stderr
    err = r.stderr.strip().splitlines()
    assert "Traceback" not in r.stderr
    assert any("selection store went away" in line and "resume" in line for line in err), err
    con = sqlite3.connect(db)
    status, = con.execute("SELECT status FROM runs").fetchone()
    assert status == "failed"
    stored = con.execute("SELECT COUNT(*) FROM programs").fetchone()[0]
    assert stored >= 2
    assert con.execute("SELECT COUNT(*) FROM programs p LEFT JOIN evaluations e ON e.program_id = p.id "
                       "WHERE e.program_id IS NULL").fetchone()[0] == 0
    brk.unlink()
    r = subprocess.run([*QDEVOLVE, "resume", "--db", str(db), "--no-progress", "--trust", "plugins"],
                       capture_output=True, text=True, timeout=180, env=env)
    assert r.returncode == 0, r.stderr
    assert con.execute("SELECT COUNT(*) FROM programs WHERE operator != 'seed'").fetchone()[0] == 12
    assert con.execute("SELECT status FROM runs").fetchone()[0] == "finished"
