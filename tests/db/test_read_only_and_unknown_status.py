"""A database on a read-only mount, and one holding a status this version does not know,
stay readable by every inspecting command (issue: bad input never ends in a traceback)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VIEWS = (["runs", "list"], ["lineage", "tree"], ["archive", "stats"], ["archive", "stats", "--json"])


@pytest.fixture(scope="module")
def run_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("ro")
    db = d / "run.sqlite"
    proc = subprocess.run([sys.executable, "-m", "qdevolve", "run", str(ROOT / "examples/function_minimization"),
                           "--iterations", "4", "--db", str(db), "--no-progress"],
                          capture_output=True, text=True, timeout=300, cwd=d)
    assert proc.returncode == 0, proc.stderr
    return db


def _view(args: list[str], db: Path, prefix: list[str] = ()) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*prefix, sys.executable, "-m", "qdevolve", *args, "--db", str(db)],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_unknown_stored_status_reads_as_invalid(run_db: Path, tmp_path: Path) -> None:
    db = tmp_path / "tampered.sqlite"
    shutil.copy(run_db, db)
    with sqlite3.connect(db) as con:
        (pid,) = con.execute("SELECT program_id FROM evaluations e JOIN programs p ON p.id = e.program_id "
                             "WHERE p.operator != 'seed' LIMIT 1").fetchone()
        con.execute("UPDATE evaluations SET status = 'from-the-future' WHERE program_id = ?", (pid,))
    for args in VIEWS:
        proc = _view(args, db)
        assert proc.returncode == 0, (args, proc.stderr)
        assert "Traceback" not in proc.stderr
    show = _view(["lineage", "show", pid], db)
    assert show.returncode == 0, show.stderr
    assert "unknown stored status" in show.stdout


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare for a read-only bind mount")
def test_read_only_mount_is_readable(run_db: Path, tmp_path: Path) -> None:
    d = tmp_path / "mnt"
    d.mkdir()
    shutil.copy(run_db, d / "run.sqlite")
    before = (d / "run.sqlite").read_bytes()
    for args in VIEWS:
        cmd = " ".join([sys.executable, "-m", "qdevolve", *args, "--db", str(d / "run.sqlite")])
        proc = subprocess.run(["unshare", "-m", "sh", "-c",
                               f"mount --bind {d} {d} && mount -o remount,ro,bind {d} && {cmd}"],
                              capture_output=True, text=True, timeout=120)
        if "mount" in proc.stderr and proc.returncode != 0 and "qdevolve" not in proc.stderr:
            pytest.skip(f"cannot make a read-only bind mount here: {proc.stderr.strip()}")
        assert proc.returncode == 0, (args, proc.stderr)
        assert "Traceback" not in proc.stderr
    assert (d / "run.sqlite").read_bytes() == before
