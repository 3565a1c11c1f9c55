"""A real ``qdevolve run`` subprocess against a hostile model server on 127.0.0.1.

Twenty children, every hostile reply mode in turn (endless stream, 1 GiB gzip bomb,
1 byte/s slow loris, finish_reason objects, token counts above 2^63 and below 0, lone
surrogates, 50 MB replies, escape sequences in error bodies, missing or odd choices, deeply
nested JSON, a block that re-decorates the fixed code): the run finishes its budget, its peak memory stays under 1 GB and its
database under 50 MB, and every failed child has a one-line, terminal-safe reason.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from qdevolve.testing import Cycle, ScriptedModel, ScriptedServer
from qdevolve.testing.hostile import HOSTILE_MODES, HostileScript

ROOT = Path(__file__).resolve().parents[2]

CONFIG = """run: {{iterations: 20, seed: 0, workers: 2}}
archive: {{type: map_elites, feature_dimensions: [radius_cv, edge_fraction], ranges: [[0.0, 1.5], [0.0, 1.0]], bins: 8}}
selection: {{type: tournament}}
limits: {{wall_s: 20}}
mutation: [{{type: diff, weight: 1.0}}]
backend: {{type: openai, api_base: "{url}", model: scripted, timeout_s: 2, retries: 1, retry_base_s: 0.05}}
"""


@pytest.mark.slow
def test_run_survives_twenty_hostile_replies_within_memory_and_disk_bounds(tmp_path: Path) -> None:
    example = tmp_path / "circle_packing"
    shutil.copytree(ROOT / "examples" / "circle_packing", example)
    model = ScriptedModel(seed=0)
    script = Cycle([HostileScript(m, valid=model) for m in HOSTILE_MODES])
    db = tmp_path / "run.sqlite"
    with ScriptedServer(script) as server:
        (example / "config.yaml").write_text(CONFIG.format(url=server.url))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        proc = subprocess.Popen([sys.executable, "-m", "qdevolve", "run", str(example), "--db", str(db),
                                 "--no-progress", "--trust", "backend.api_base"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
        out = proc.stdout.read().decode(errors="replace")
        _, status, usage = os.wait4(proc.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, out[-3000:]
    peak_mb = usage.ru_maxrss / 1024  # KiB on Linux
    assert peak_mb < 1024, f"peak RSS {peak_mb:.0f} MB"
    size_mb = sum(p.stat().st_size for p in tmp_path.glob("run.sqlite*")) / 1e6
    assert size_mb < 50, f"database {size_mb:.1f} MB"
    assert "\x1b" not in out

    con = sqlite3.connect(db)
    rows = con.execute("SELECT e.status, e.error FROM programs p JOIN evaluations e ON e.program_id = p.id "
                       "WHERE p.operator != 'seed'").fetchall()
    assert len(rows) == 20, "the run finishes its budget"
    failed = [err for status, err in rows if status != "ok"]
    assert len(failed) >= 15
    for err in failed:
        assert err and "\n" not in err and "\x1b" not in err and len(err) <= 600, err
    reasons = " | ".join(failed)
    for expected in ("max_response_bytes", "finish_reason is an object", "outside [0,", "HTTP 400",
                     "timed out", "no 'choices' list", "not usable JSON", "crosses an EVOLVE-BLOCK marker"):
        assert expected in reasons, expected
    ok = [s for s, _ in rows if s == "ok"]
    assert ok, "lone-surrogate replies still make valid children"
    texts = con.execute("SELECT completion FROM rollouts").fetchall()
    assert all(len(t[0] or "") <= 200_000 for t in texts)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
