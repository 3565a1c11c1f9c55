"""The outer loop end to end: real SQLite files, real sandboxed subprocesses."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

import pytest

from qdevolve.db import LineageStore
from qdevolve.evolve.core.engine import Evolution
from qdevolve.evolve.setup.example import load_example
from qdevolve.types import Program

from .conftest import QDEVOLVE


def _run(example: Path, db: Path, **overrides):
    ex = load_example(example)
    cfg = ex.config.with_overrides(**overrides)
    store = LineageStore(db)
    evo = Evolution.start(ex, cfg, store, progress=False)
    summary = evo.run()
    evo.close()
    return store, summary


def _codes_scores(store: LineageStore, run_id: str):
    return [(p.code, None if r is None else r.score) for _, p, r in store.iter_programs(run_id)]


def test_run_stores_budget_and_improves(tiny_example: Path, tmp_path: Path) -> None:
    store, summary = _run(tiny_example, tmp_path / "a.sqlite")
    assert summary.evaluations == 12 + 1
    assert store.count_programs(summary.run_id) == 13
    assert not store.unevaluated(summary.run_id)
    assert summary.best_score >= summary.seed_score
    ops = {p.operator for _, p, _ in store.iter_programs(summary.run_id)}
    assert ops == {"seed", "ast"}
    # every child has a parent edge to a stored program
    con = sqlite3.connect(tmp_path / "a.sqlite")
    orphans = con.execute("SELECT COUNT(*) FROM programs p WHERE p.operator != 'seed' AND NOT EXISTS "
                          "(SELECT 1 FROM edges e WHERE e.child_id = p.id)").fetchone()[0]
    assert orphans == 0
    assert con.execute("SELECT COUNT(*) FROM archive_events").fetchone()[0] >= 1


@pytest.mark.slow
def test_same_seed_same_programs(tiny_example: Path, tmp_path: Path) -> None:
    s1, r1 = _run(tiny_example, tmp_path / "1.sqlite", seed=3)
    s2, r2 = _run(tiny_example, tmp_path / "2.sqlite", seed=3)
    assert _codes_scores(s1, r1.run_id) == _codes_scores(s2, r2.run_id)
    s3, r3 = _run(tiny_example, tmp_path / "3.sqlite", seed=4)
    assert _codes_scores(s1, r1.run_id) != _codes_scores(s3, r3.run_id)


def test_resume_evaluates_stored_but_unevaluated_program(tiny_example: Path, tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    store, summary = _run(tiny_example, db, iterations=4)
    seed_id = next(p.id for _, p, _ in store.iter_programs(summary.run_id) if p.operator == "seed")
    orphan = Program(code="A = 3.0\nB = -1.0\n\ndef value():\n    return 0.0\n", run_id=summary.run_id,
                     parent_ids=(seed_id,), operator="ast", generation=1)
    store.write(programs=[orphan])  # as if the controller died before evaluating it
    assert [p.id for p in store.unevaluated(summary.run_id)] == [orphan.id]
    evo = Evolution.resume(store, summary.run_id, iterations=8, progress=False)
    evo.run()
    evo.close()
    assert not store.unevaluated(summary.run_id)
    assert store.count_programs(summary.run_id) == 9
    assert store.get_evaluation(orphan.id).score == 0.0


@pytest.mark.slow
def test_resume_extends_budget_cli(tiny_example: Path, tmp_path: Path) -> None:
    db = tmp_path / "c.sqlite"
    r = subprocess.run([*QDEVOLVE, "run", str(tiny_example), "--sandbox", "local", "--db", str(db), "--iterations", "3",
                        "--no-progress"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "best score" in r.stdout and "lineage tree" in r.stdout
    r = subprocess.run([*QDEVOLVE, "resume", "--db", str(db), "--iterations", "6", "--no-progress"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    con = sqlite3.connect(db)
    assert con.execute("SELECT COUNT(*) FROM programs").fetchone()[0] == 7
    assert con.execute("SELECT COUNT(DISTINCT program_id) FROM evaluations").fetchone()[0] == 7


def _lease_row(db: Path) -> tuple | None:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return con.execute("SELECT pid, host FROM run_leases").fetchone()
        finally:
            con.close()
    except sqlite3.Error:
        return None


@pytest.mark.slow
def test_one_writer_per_run_refuses_then_takes_over(tiny_example: Path, tmp_path: Path) -> None:
    """Two ``qdevolve resume`` of one run at once: the second exits 2 with one line while the
    first lives; after the first is SIGKILLed, the next resume takes the stale lease over."""
    import os
    import signal
    import time

    db = tmp_path / "lease.sqlite"
    r = subprocess.run([*QDEVOLVE, "run", str(tiny_example), "--sandbox", "local", "--db", str(db), "--iterations", "2", "--no-progress"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert _lease_row(db) is None, "a finished run releases its lease"
    first = subprocess.Popen([*QDEVOLVE, "resume", "--db", str(db), "--iterations", "5000", "--no-progress"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.time() + 60
        while _lease_row(db) is None and time.time() < deadline and first.poll() is None:
            time.sleep(0.1)
        assert _lease_row(db)[0] == first.pid
        second = subprocess.run([*QDEVOLVE, "resume", "--db", str(db), "--iterations", "5000", "--no-progress"],
                                capture_output=True, text=True, timeout=120)
        assert second.returncode == 2, second.stderr
        lines = [ln for ln in second.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and "being written by pid" in lines[0] and str(first.pid) in lines[0], lines
        assert first.poll() is None, "the first writer is untouched"
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
    con = sqlite3.connect(db)
    n = con.execute("SELECT COUNT(*) FROM programs WHERE operator != 'seed'").fetchone()[0]
    third = subprocess.run([*QDEVOLVE, "resume", "--db", str(db), "--iterations", str(n + 3), "--no-progress"],
                           capture_output=True, text=True, timeout=120)
    assert third.returncode == 0, third.stderr
    assert con.execute("SELECT COUNT(*) FROM programs").fetchone()[0] == n + 3 + 1
    assert con.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0] == n + 3 + 1
    assert con.execute("SELECT status FROM runs").fetchone()[0] == "finished"
    assert _lease_row(db) is None


ABORTING_BACKEND = '''
from qdevolve import registry
from qdevolve.errors import RunAborted


@registry.backend("aborting_test")
class Aborting:
    def __init__(self, **kw):
        self.calls = 0

    async def generate(self, requests):
        self.calls += 1
        raise RunAborted("model server at http://x gone: connection refused")

    def load_policy(self, version, path):
        pass


@registry.mutation("ask_model_test")
class AskModel:
    """Hands the backend's errors through (the run, not the operator, decides what they mean)."""

    n_parents = 1
    needs_backend = True

    async def propose(self, parent, context, backend):
        await backend.generate([])
        return []
'''


def test_run_aborted_by_backend_stops_cleanly_and_exits_1(tiny_example: Path, tmp_path: Path) -> None:
    plugin = tmp_path / "aborting.py"
    plugin.write_text(ABORTING_BACKEND)
    db = tmp_path / "abort.sqlite"
    r = subprocess.run([*QDEVOLVE, "run", str(tiny_example), "--sandbox", "local", "--db", str(db), "--backend", "aborting_test",
                        "--mutation", "ask_model_test", "--plugin", str(plugin), "--no-progress"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, (r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert lines == ["error: model server at http://x gone: connection refused"], lines
    con = sqlite3.connect(db)
    assert con.execute("SELECT status FROM runs").fetchone()[0] == "stopped"
    assert con.execute("SELECT COUNT(*) FROM programs").fetchone()[0] == 1  # the seed; nothing half-written
    assert con.execute("SELECT COUNT(*) FROM run_leases").fetchone()[0] == 0
