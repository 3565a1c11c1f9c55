"""``qdevolve run --executor ray`` end to end on a real Ray cluster (and PostgreSQL when
``QDEVOLVE_TEST_PG_URL`` is set, else a SQLite file): a Ray worker SIGKILLed mid-run, and a
controller SIGKILLed and resumed against the same cluster. Afterwards every program has
exactly one evaluation, each run on a Ray worker, and the run holds exactly its budget."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from tests.scale._example import write_example

pytestmark = pytest.mark.ray
WORKER = re.compile(r"^ray:[0-9a-f]{56}:(\d+)$")


@pytest.fixture()
def db(tmp_path: Path) -> str:
    return os.environ.get("QDEVOLVE_TEST_PG_URL") or str(tmp_path / "run.sqlite")


def _engine(db: str):  # noqa: ANN202
    return create_engine(db if "://" in db else f"sqlite:///{db}")


def _rows(db: str, name: str, sql: str) -> list[tuple]:
    """``sql`` over the programs of the run named ``name`` (``:rid`` is its id)."""
    if "://" not in db and not Path(db).exists():
        return []
    eng = _engine(db)
    try:
        with eng.connect() as c:
            try:
                rid = c.execute(text("SELECT id FROM runs WHERE name = :n"), {"n": name}).scalar()
            except Exception:  # the schema is not there yet
                return []
            return [] if rid is None else [tuple(r) for r in c.execute(text(sql), {"rid": rid}).all()]
    finally:
        eng.dispose()


EVALS = ("SELECT p.id, p.operator, e.worker, e.created_at FROM programs p LEFT JOIN evaluations e "
         "ON e.program_id = p.id WHERE p.run_id = :rid ORDER BY e.created_at")


def _start(args: list[str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "qdevolve", *args, "--no-progress"], cwd=cwd, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "COLUMNS": "200", "RAY_USAGE_STATS_ENABLED": "0"})


def _wait_for(db: str, name: str, n: int, proc: subprocess.Popen[str], timeout: float = 120.0) -> list[tuple]:
    """Rows of :data:`EVALS` once ``n`` children are evaluated."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        rows = _rows(db, name, EVALS)
        if sum(1 for r in rows if r[1] != "seed" and r[2]) >= n:
            return rows
        if proc.poll() is not None:
            pytest.fail(f"the run ended early (rc {proc.returncode}): {proc.stderr.read()[-2000:]}")
        time.sleep(0.2)
    proc.kill()
    pytest.fail(f"fewer than {n} evaluations after {timeout} s")


def _check_run(db: str, name: str, budget: int) -> list[tuple]:
    rows = _rows(db, name, EVALS)
    ids = [r[0] for r in rows]
    assert len(ids) == len(set(ids)), "a program has two evaluations"
    assert all(r[2] is not None for r in rows), "a program has no evaluation"
    assert sum(1 for r in rows if r[1] != "seed") == budget
    bad = [r[2] for r in rows if not WORKER.match(r[2])]
    assert not bad, f"evaluations not run on a Ray worker: {bad}"
    counter = _rows(db, name, "SELECT value FROM run_state WHERE run_id = :rid AND key = 'budget.stored'")
    assert counter == [(str(budget),)]
    return rows


def test_run_on_ray_survives_a_sigkilled_worker(ray_address: str, db: str, tmp_path: Path) -> None:
    example = write_example(tmp_path, iterations=12, sleep=0.5)
    name = f"ray-e2e-{uuid.uuid4().hex[:8]}"
    proc = _start(["run", str(example), "--db", db, "--name", name, "--executor", "ray",
                   "--ray-address", ray_address, "--sandbox", "local"], tmp_path)
    rows = _wait_for(db, name, 2, proc)
    victim = int(WORKER.match(next(r[2] for r in rows if r[1] != "seed")).group(1))
    os.kill(victim, signal.SIGKILL)  # a Ray worker process of this run, mid-run
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err[-3000:]
    rows = _check_run(db, name, 12)
    workers = {r[2] for r in rows}
    assert len(workers) >= 3, f"no replacement worker after the kill: {workers}"
    password = db.split("://", 1)[1].split("@", 1)[0].partition(":")[2] if "://" in db else ""
    if password:
        assert f":{password}@" not in out + err and ":***@" in out  # the hints mask it


def test_sigkilled_controller_resumes_on_the_same_cluster(ray_address: str, db: str, tmp_path: Path) -> None:
    example = write_example(tmp_path, iterations=10, sleep=0.4, seed=3)
    name = f"ray-resume-{uuid.uuid4().hex[:8]}"
    proc = _start(["run", str(example), "--db", db, "--name", name, "--executor", "ray",
                   "--ray-address", ray_address, "--sandbox", "local"], tmp_path)
    _wait_for(db, name, 3, proc)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    before = {r[0] for r in _rows(db, name, EVALS)}
    rid = _rows(db, name, "SELECT :rid")[0][0]
    resumed = _start(["resume", "--db", db, "--run", rid, "--trust", "run.executor_options.address"], tmp_path)
    out, err = resumed.communicate(timeout=180)
    assert resumed.returncode == 0, err[-3000:]
    rows = _check_run(db, name, 10)
    assert before <= {r[0] for r in rows}, "a program stored before the kill is gone"


def test_a_job_whose_retries_are_spent_stops_the_run_resumable(ray_address: str, db: str, tmp_path: Path) -> None:
    """``max_retries: 0`` and a killed worker: ``WorkerLost`` stops the run with one line
    (exit 1), and ``qdevolve resume`` finishes it with nothing stored twice."""
    example = write_example(tmp_path, iterations=8, sleep=1.0, seed=5,
                            extra="  executor_options: {max_retries: 0}\n")
    name = f"ray-lost-{uuid.uuid4().hex[:8]}"
    proc = _start(["run", str(example), "--db", db, "--name", name, "--executor", "ray",
                   "--ray-address", ray_address, "--sandbox", "local"], tmp_path)
    rows = _wait_for(db, name, 1, proc)
    for worker in {r[2] for r in rows if r[2]}:  # every worker seen so far: at least one is busy
        try:
            os.kill(int(WORKER.match(worker).group(1)), signal.SIGKILL)
        except ProcessLookupError:
            pass
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert "worker lost" in last or "died" in last, err[-3000:]
    assert "Traceback" not in err
    assert _rows(db, name, "SELECT status FROM runs WHERE id = :rid") == [("stopped",)]
    rid = _rows(db, name, "SELECT :rid")[0][0]
    resumed = _start(["resume", "--db", db, "--run", rid, "--ray-address", ray_address], tmp_path)
    _out, err = resumed.communicate(timeout=180)
    assert resumed.returncode == 0, err[-3000:]
    _check_run(db, name, 8)
