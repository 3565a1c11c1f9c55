"""The outer loop end to end: real SQLite files, real sandboxed subprocesses."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

from qdevolve.db import LineageStore
from qdevolve.evolve.engine import Evolution
from qdevolve.evolve.example import load_example
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


def test_resume_extends_budget_cli(tiny_example: Path, tmp_path: Path) -> None:
    db = tmp_path / "c.sqlite"
    r = subprocess.run([*QDEVOLVE, "run", str(tiny_example), "--db", str(db), "--iterations", "3",
                        "--no-progress"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "best score" in r.stdout and "lineage tree" in r.stdout
    r = subprocess.run([*QDEVOLVE, "resume", "--db", str(db), "--iterations", "6", "--no-progress"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    con = sqlite3.connect(db)
    assert con.execute("SELECT COUNT(*) FROM programs").fetchone()[0] == 7
    assert con.execute("SELECT COUNT(DISTINCT program_id) FROM evaluations").fetchone()[0] == 7
