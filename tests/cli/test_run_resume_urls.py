"""``qdevolve run`` / ``resume`` / ``train`` with a SQLAlchemy URL as ``--db`` (PostgreSQL),
and ``run``'s hints with the password masked."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from tests.scale._example import write_example


def qdevolve(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # the example's config chooses the local sandbox; weaker than the default, so the user's flag says it
    local = ["--sandbox", "local"] if args[:1] == ("run",) and "--sandbox" not in args else []
    return subprocess.run([sys.executable, "-m", "qdevolve", *args, *local], capture_output=True, text=True, timeout=300,
                          cwd=cwd, env={**os.environ, "COLUMNS": "200", **(env or {})})


def _masked(url: str, out: str) -> None:
    password = make_url(url).password
    assert password and f":{password}@" not in out
    assert ":***@" in out


@pytest.mark.slow
@pytest.mark.postgres
def test_run_then_resume_on_a_postgres_url(pg_url: str, tmp_path: Path) -> None:
    example = write_example(tmp_path, iterations=4, sleep=0.0)
    name = f"url-run-{uuid.uuid4().hex[:8]}"
    r = qdevolve("run", str(example), "--db", pg_url, "--name", name, "--no-progress", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    _masked(pg_url, r.stdout + r.stderr)
    assert "qdevolve resume --db postgresql+psycopg://" in r.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["example"]  # the URL was never a path
    eng = create_engine(pg_url)
    with eng.connect() as c:
        rid = c.execute(text("SELECT id FROM runs WHERE name = :n"), {"n": name}).scalar()
    # resume through $QDEVOLVE_DB with a larger budget
    r = qdevolve("resume", "--run", rid, "--iterations", "7", "--no-progress", cwd=tmp_path,
                 env={"QDEVOLVE_DB": pg_url})
    assert r.returncode == 0, r.stderr
    _masked(pg_url, r.stdout + r.stderr)
    with eng.connect() as c:
        n = c.execute(text("SELECT COUNT(*) FROM programs p JOIN evaluations e ON e.program_id = p.id "
                           "WHERE p.run_id = :r AND p.operator != 'seed'"), {"r": rid}).scalar()
        counter = c.execute(text("SELECT value FROM run_state WHERE run_id = :r AND key = 'budget.stored'"),
                            {"r": rid}).scalar()
    eng.dispose()
    assert n == 7 and counter == "7"


def test_run_refuses_an_unreachable_server_in_one_line(tmp_path: Path) -> None:
    example = write_example(tmp_path, iterations=2, sleep=0.0)
    url = "postgresql+psycopg://qd:s3cr3t-pw@127.0.0.1:9/nowhere"
    r = qdevolve("run", str(example), "--db", url, "--no-progress", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert "s3cr3t-pw" not in r.stdout + r.stderr and "qd:***@127.0.0.1:9" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["example"]


@pytest.mark.slow
@pytest.mark.postgres
def test_train_on_a_postgres_url(pg_url: str, tmp_path: Path) -> None:
    r = qdevolve("train", "--task", "multi_answer", "--objective", "grpo", "--steps", "1", "--db", pg_url,
                 "--cache-dir", str(tmp_path / "cache"), "--sft-steps", "10", "--prompts-per-step", "2",
                 "--group-size", "4", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    _masked(pg_url, r.stdout + r.stderr)
    assert "stored policy version 1" in r.stdout
    assert sorted(p.name for p in (tmp_path / "policies").glob("*/v*")) == ["v0", "v1"]  # weights: ./policies


@pytest.mark.slow
def test_ray_options_on_a_local_run_are_refused(tmp_path: Path) -> None:
    example = write_example(tmp_path, iterations=2, sleep=0.0)
    db = str(tmp_path / "r.sqlite")
    r = qdevolve("run", str(example), "--db", db, "--no-progress", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = qdevolve("resume", "--db", db, "--ray-address", "127.0.0.1:1", "--no-progress", cwd=tmp_path)
    assert r.returncode == 2 and "does not use the ray executor" in r.stderr, r.stderr
    r = qdevolve("run", str(example), "--db", str(tmp_path / "s.sqlite"), "--executor", "nope",
                 "--ray-address", "127.0.0.1:1", "--no-progress", cwd=tmp_path)
    assert r.returncode == 2 and "--ray-address" in r.stderr, r.stderr
