"""Real runs of the two-objective example: the summary and ``archive stats`` show the front,
the stored events are what a replay does, and a run SIGKILLed mid-way resumes to the front an
uninterrupted run reaches."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from qdevolve.archive.pareto_math import dominates, signed
from qdevolve.cli.archive import rebuild
from qdevolve.db.store import open_store

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "pareto_sine"
QD = [sys.executable, "-m", "qdevolve"]
OBJ = {"accuracy": "max", "length": "min"}
SEEDED = ["--seed", "2", "--workers", "1", "--max-pending", "1", "--no-progress"]


def _run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*QD, *args], capture_output=True, text=True, timeout=timeout)


def _members_from_events(db: Path) -> list[str]:
    """The archive's members as the live engine recorded them (added/improved/replaced in,
    removed out), in the order they came in."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT program_id, kind FROM archive_events ORDER BY id").fetchall()
        seed = con.execute("SELECT id FROM programs WHERE operator = 'seed'").fetchone()[0]
    finally:
        con.close()
    members = [seed]  # the engine stores the seed's placement with the run, not as an event row
    for pid, kind in rows:
        if kind == "removed":
            members.remove(pid)
        elif pid not in members:
            members.append(pid)
    return members


def _front(db: Path) -> tuple[list[str], dict]:
    """The members of the archive rebuilt from the store (the resume path), and its stats."""
    with open_store(db) as store:
        _run_row, rep = rebuild(store, None, points=1)
    return [e.program_id for e in rep.archive.elites()], rep.archive.stats()


def _front_set(db: Path) -> set[tuple[str, tuple[float, ...]]]:
    """The rebuilt front as (code hash, objectives): ids differ between two runs, code does not."""
    with open_store(db) as store:
        run, rep = rebuild(store, None, points=1)
        hashes = {p.id: p.code_hash for _, p, _ in store.iter_evaluated(run["id"])}
    return {(hashes[r["program_id"]], tuple(r["objectives"][n] for n in OBJ)) for r in rep.archive.stats()["front"]}


@pytest.mark.slow
def test_example_run_shows_its_front(tmp_path: Path) -> None:
    db = tmp_path / "run.sqlite"
    r = _run("run", str(EXAMPLE), "--db", str(db), "--iterations", "24", *SEEDED)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Pareto front" in r.stdout and "accuracy (max)" in r.stdout and "length (min)" in r.stdout
    members, stats = _front(db)
    assert members == _members_from_events(db), "replaying the store rebuilds the live archive"
    front = stats["front"]
    assert len(front) >= 3, "the ast mutator moves programs along the front in a short run"
    vecs = [signed(f["objectives"], OBJ) for f in front]
    assert not any(dominates(a, b) for a in vecs for b in vecs)
    with open_store(db) as store:
        seed = next(p.id for _, p, _ in store.iter_evaluated(store.latest_run_id()) if p.operator == "seed")
    assert any(f["program_id"] != seed for f in front), "children reach the front"
    out = _run("archive", "stats", "--db", str(db))
    assert out.returncode == 0, out.stderr
    assert "Pareto front" in out.stdout
    for f in front:
        assert f["program_id"][:12] in out.stdout
    got = json.loads(_run("archive", "stats", "--db", str(db), "--json").stdout)
    assert got["stats"]["front"] == front


def _children(db: Path) -> int:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return con.execute("SELECT COUNT(*) FROM programs").fetchone()[0] - 1
        finally:
            con.close()
    except sqlite3.Error:
        return -1


@pytest.mark.slow
def test_sigkill_then_resume_rebuilds_the_same_front(tmp_path: Path) -> None:
    budget = 30
    whole = tmp_path / "whole.sqlite"
    r = _run("run", str(EXAMPLE), "--db", str(whole), "--iterations", str(budget), *SEEDED)
    assert r.returncode == 0, r.stderr[-3000:]

    killed = tmp_path / "killed.sqlite"
    proc = subprocess.Popen([*QD, "run", str(EXAMPLE), "--db", str(killed), "--iterations", str(budget), *SEEDED],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.time() + 200
    while proc.poll() is None and time.time() < deadline and _children(killed) < budget // 2:
        time.sleep(0.02)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    stored = _children(killed)
    assert 0 < stored < budget
    at_kill = _members_from_events(killed)
    assert _front(killed)[0] == at_kill, "the rebuilt archive is the one the killed run had"

    r = _run("resume", "--db", str(killed), "--no-progress")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Pareto front" in r.stdout
    assert _children(killed) == budget
    # the resumed engine's later events match a replay, and the front is the uninterrupted run's
    assert _front(killed)[0] == _members_from_events(killed)
    assert _front_set(killed) == _front_set(whole)


@pytest.mark.slow
def test_an_evaluation_without_an_objective_is_invalid_and_names_it(tmp_path: Path) -> None:
    ex = tmp_path / "ex"
    shutil.copytree(EXAMPLE, ex)
    ev = (ex / "evaluator.py").read_text()
    # children less accurate than 0.99 leave `length` out: each is stored invalid, naming it
    (ex / "evaluator.py").write_text(ev.replace('    return {"combined_score": accuracy - length / 1000.0, "accuracy": accuracy, "length": length,',
                                                '    if accuracy < 0.99:\n        return {"combined_score": accuracy, "accuracy": accuracy}\n'
                                                '    return {"combined_score": accuracy - length / 1000.0, "accuracy": accuracy, "length": length,'))
    db = tmp_path / "run.sqlite"
    r = _run("run", str(ex), "--db", str(db), "--iterations", "8", *SEEDED, "--fail-fast-children", "0")
    assert r.returncode == 0, r.stderr[-3000:]
    con = sqlite3.connect(db)
    errors = [e for (e,) in con.execute("SELECT error FROM evaluations WHERE status = 'invalid'")]
    con.close()
    assert errors and all("objective 'length' is not among the evaluator's metrics" in e for e in errors)

    (ex / "evaluator.py").write_text(ev.replace('"length": length,', ''))  # the seed too: nothing starts
    r = _run("run", str(ex), "--db", str(tmp_path / "none.sqlite"), "--iterations", "4", *SEEDED)
    assert r.returncode == 2 and "objective 'length' is not among the evaluator's metrics" in r.stderr
