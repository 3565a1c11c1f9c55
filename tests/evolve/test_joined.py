"""Both loops joined on CPU: the tiny expr_dsl policy, the transformers backend, the trainer,
one lineage database. Marked slow: the tiny policy is pre-trained once (cached) per machine."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from .conftest import QDEVOLVE

pytest.importorskip("torch", reason="the joined loop needs the 'rl' extra (torch, transformers)")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "expr_evolution"


def _qd(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*QDEVOLVE, *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_joined_run_stores_versions_rollouts_and_labels(tmp_path: Path) -> None:
    db = tmp_path / "joined.sqlite"
    r = _qd("run", str(EXAMPLE), "--db", str(db), "--iterations", "96", "--train-every", "32",
            "--train-objective", "ips", "--no-progress")
    assert r.returncode == 0, r.stderr[-3000:]
    con = sqlite3.connect(db)
    versions = con.execute("SELECT version, objective, step FROM policy_versions ORDER BY version").fetchall()
    assert len(versions) >= 3, versions
    assert all(v[1] == "ips" for v in versions)
    steps = [v[2] for v in versions]
    assert steps == sorted(steps) and steps[-1] >= 2
    n_children = con.execute("SELECT COUNT(*) FROM programs WHERE operator != 'seed'").fetchone()[0]
    assert n_children == 96
    linked = con.execute("SELECT COUNT(*) FROM rollouts r JOIN programs p ON p.id = r.program_id "
                         "WHERE r.token_ids != '[]' AND r.logprobs != '[]' "
                         "AND json_extract(r.metadata, '$.duplicate_of') IS NULL").fetchone()[0]
    assert linked == 96, "every mutation is a rollout with token ids and log-probs, linked to its program"
    copies = con.execute("SELECT COUNT(*) FROM rollouts r JOIN programs p ON p.id = r.program_id "
                         "WHERE json_extract(r.metadata, '$.duplicate_of') = p.id").fetchone()[0]
    total = con.execute("SELECT COUNT(*) FROM rollouts").fetchone()[0]
    assert total == 96 + copies, "the other rollouts are copies, linked to the program they copy"
    labelled = dict(con.execute("SELECT policy_version, COUNT(*) FROM programs WHERE operator = 'policy' "
                                "GROUP BY policy_version").fetchall())
    assert None not in labelled and len(labelled) >= 3, labelled
    rewards = con.execute("SELECT COUNT(*) FROM rollouts WHERE reward IS NULL").fetchone()[0]
    assert rewards == 0
    out = _qd("lineage", "policy", "--db", str(db))
    assert out.returncode == 0 and "ips" in out.stdout, out.stderr
    tree = _qd("lineage", "tree", "--db", str(db), "--label", "policy_version", "--depth", "2")
    assert tree.returncode == 0, tree.stderr


@pytest.mark.slow
def test_joined_run_killed_resumes_from_latest_policy(tmp_path: Path) -> None:
    db = tmp_path / "kill.sqlite"
    # make sure the tiny policy is cached so the kill lands inside evolution
    warm = _qd("run", str(EXAMPLE), "--db", str(tmp_path / "warm.sqlite"), "--iterations", "8",
               "--train-every", "8", "--no-progress")
    assert warm.returncode == 0, warm.stderr[-3000:]
    proc = subprocess.Popen([*QDEVOLVE, "run", str(EXAMPLE), "--db", str(db), "--iterations", "400",
                             "--train-every", "16", "--no-progress"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    con = sqlite3.connect(db, timeout=30) if db.exists() else None
    deadline = time.time() + 300
    while time.time() < deadline:
        time.sleep(1.0)
        if db.exists():
            con = con or sqlite3.connect(db, timeout=30)
            try:
                if con.execute("SELECT COUNT(*) FROM policy_versions").fetchone()[0] >= 3:
                    break
            except sqlite3.OperationalError:
                continue
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    con = sqlite3.connect(db)
    before_max = con.execute("SELECT MAX(version) FROM policy_versions").fetchone()[0]
    before_prog = con.execute("SELECT MAX(seq) FROM programs").fetchone()[0]
    assert before_max >= 2, "killed after at least two trainer steps"
    r = _qd("resume", "--db", str(db), "--iterations", str(con.execute(
        "SELECT COUNT(*) FROM programs WHERE operator != 'seed'").fetchone()[0] + 48), "--no-progress")
    assert r.returncode == 0, r.stderr[-3000:]
    new_versions = [v for (v,) in con.execute("SELECT policy_version FROM programs WHERE seq > ? AND "
                                                "operator = 'policy'", (before_prog,))]
    assert new_versions, "the resumed run made new programs"
    assert min(new_versions) >= before_max, "resume continues from the latest policy version, not the base"
    after_max = con.execute("SELECT MAX(version) FROM policy_versions").fetchone()[0]
    assert after_max > before_max
