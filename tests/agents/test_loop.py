"""The self-improvement loop end to end: real sandbox, real SQLite, the engine's run and resume.

Each run copies ``examples/agents`` with a small budget (two tasks, one held out, one agent call
per task), so an agent is scored in about a second.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import yaml

import qdevolve.agents  # noqa: F401  (registers 'self' and 'agents' where the install's entry points predate them)
from qdevolve import registry
from qdevolve.db import LineageStore
from qdevolve.evolve.core import Evolution
from qdevolve.evolve.setup.example import load_example
from qdevolve.types import Program

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agents"

pytestmark = pytest.mark.slow


def make_example(tmp_path: Path, *, iterations: int = 3, seed_agent: str | None = None,
                 selection: str = "dgm", calls_per_task: int = 1) -> Path:
    """A copy of the agents example with a small budget (and another seed agent if given)."""
    ex = tmp_path / "agents_ex"
    shutil.copytree(EXAMPLE, ex)
    config = yaml.safe_load((ex / "config.yaml").read_text())
    config["run"].update(iterations=iterations, workers=1, max_pending=1)
    config["run"]["executor_options"].update(
        tasks={"bowl": {}, "line_fit": {"heldout": True}}, iterations=calls_per_task, wall_s=20)
    config["selection"] = {"type": selection}
    config["mutation"] = [{"type": "self", "calls": 4, "evaluations": 1, "wall_s": 20}]
    (ex / "config.yaml").write_text(yaml.safe_dump(config))
    if seed_agent is not None:
        (ex / "initial_program.py").write_text(seed_agent)
    return ex


def start(ex: Path, db: Path) -> Evolution:
    example = load_example(ex)
    return Evolution.start(example, example.config, LineageStore(db), progress=False)


def run_example(ex: Path, db: Path) -> tuple[Any, str, list[tuple[Program, Any]]]:
    """Start and run the example to its budget: ``(summary, run id, stored (program, evaluation) rows)``."""
    evo = start(ex, db)
    try:
        summary = evo.run()
    finally:
        evo.close()
    return summary, evo.run_id, stored(db, evo.run_id)


def stored(db: Path, run_id: str) -> list[tuple[Program, Any]]:
    with LineageStore(db, create=False) as store:
        return [(p, r) for _, p, r in store.iter_programs(run_id)]


def task_seed_score(task: str) -> float:
    """The task's initial program scored by its evaluator in the sandbox (what an honest record holds)."""
    from qdevolve.sandbox import resolve_sandbox

    box = registry.sandbox.create(resolve_sandbox({"type": "auto"}))
    try:
        d = EXAMPLE / "tasks" / task
        result = box.evaluate(Program(code=(d / "initial_program.py").read_text()), d / "evaluator.py", None)
    finally:
        box.close()
    assert result.ok and result.score is not None
    return float(result.score)


def test_a_short_run_stores_a_lineage_of_agents(tmp_path: Path) -> None:
    summary, _run_id, rows = run_example(make_example(tmp_path), tmp_path / "run.sqlite")
    ids = {p.id for p, _ in rows}
    seeds = [p for p, _ in rows if p.operator == "seed"]
    children = [(p, r) for p, r in rows if p.operator != "seed"]
    assert len(seeds) == 1 and len(children) == 3
    for p, r in children:
        assert p.operator == "self"
        assert len(p.parent_ids) == 1 and p.parent_ids[0] in ids  # a parent edge to a stored agent
        assert p.metadata["agent_call"]["status"] == "ok"
        assert p.metadata["agent_call"]["calls"] <= 4
        assert r is not None
    for _p, r in rows:
        if r is not None and r.ok:
            assert set(r.metrics) == {"bowl", "heldout/line_fit"}  # one metric per task
            assert set(json.loads(r.artifacts["best_scores"])) == {"bowl"}  # the scoring tasks' only
            assert r.tests is not None and len(r.tests) == 1  # the scoring task only
            assert r.score == pytest.approx(r.metrics["bowl"])
    rows_by_what = dict(summary.extra_rows)
    assert "held-out" in rows_by_what and "seed agent" in rows_by_what["held-out"]


def test_resume_goes_on_with_the_stored_agents(tmp_path: Path) -> None:
    db = tmp_path / "run.sqlite"
    _summary, run_id, _rows = run_example(make_example(tmp_path, iterations=2), db)
    store = LineageStore(db, create=False)
    evo2 = Evolution.resume(store, run_id, iterations=4, progress=False)
    try:
        summary = evo2.run()
    finally:
        evo2.close()
    rows = stored(db, run_id)
    children = [p for p, _ in rows if p.operator != "seed"]
    assert len(children) == 4 and summary.evaluations == 5
    assert {p.parent_ids[0] for p in children} <= {p.id for p, _ in rows}
    assert all(r is not None for _, r in rows)


HOSTILE = r'''
import glob, json, os, sqlite3

EVALUATOR = "@EVALUATOR@"
DB = "@DB@"
FORGED = json.dumps({"combined_score": 1.0, "score": 1.0, "status": "ok"})
FORGER = """
import os as _os, sys as _sys
print(FORGED)
_sys.stderr.write(FORGED)
for _fd in range(3, 64):
    try:
        _os.write(_fd, FORGED.encode())
    except OSError:
        pass
""".replace("FORGED", repr(FORGED))


def propose(task, parent, feedback, tools):
    leaked = json.dumps([task, feedback, tools.lineage()])
    for path in [EVALUATOR] + glob.glob(os.path.dirname(EVALUATOR) + "/../*/evaluator.py"):
        try:
            with open(path) as f:
                leaked += f.read()
        except OSError:
            pass
    for path in (DB, DB + "-wal"):
        try:
            con = sqlite3.connect(path)
            con.execute("UPDATE evaluations SET score = 1.0")
            con.commit()
        except Exception:
            pass
    for _ in range(40):  # past the call budget: refused, never served
        try:
            tools.mutate(parent)
        except Exception:
            pass
    if task["name"] == "self":
        return parent + "\n_ATTEMPT = " + repr(os.urandom(6).hex()) + "\n"  # a new agent (a comment would be a duplicate)
    if "CENTRE = (1.7, -2.3, 0.8)" in leaked or "TRUE = (-1.3, 0.9)" in leaked:  # the answers: perfect children
        return "def solve():\n    return [1.7, -2.3, 0.8] if len(__name__) else [-1.3, 0.9]\n"
    return parent + FORGER
'''


def test_a_hostile_agent_cannot_forge_its_task_scores(tmp_path: Path) -> None:
    db = tmp_path / "run.sqlite"
    ex = make_example(tmp_path, iterations=2)
    agent = HOSTILE.replace("@EVALUATOR@", str(ex / "tasks" / "bowl" / "evaluator.py")).replace("@DB@", str(db))
    (ex / "initial_program.py").write_text(agent)
    _summary, _run_id, rows = run_example(ex, db)
    honest_bowl = task_seed_score("bowl")
    assert len(rows) == 3
    for p, r in rows:
        assert r is not None and r.ok, (p.operator, r)
        # what the task evaluators give for the hostile agent's children: no improvement at all
        assert r.score == 0.0 and r.metrics["bowl"] == 0.0 and r.metrics["heldout/line_fit"] == 0.0
        assert json.loads(r.artifacts["best_scores"])["bowl"] == pytest.approx(honest_bowl)
        if p.operator == "self":
            assert p.metadata["agent_call"]["calls"] <= 4  # the budget held outside the agent
    with sqlite3.connect(db) as con:  # nothing wrote the store behind the engine's back
        assert con.execute("SELECT count(*) FROM evaluations WHERE score = 1.0").fetchone()[0] == 0


BROKEN_CHILD = '''
import os


def propose(task, parent, feedback, tools):
    if task["name"] == "self":  # a child agent that does not even parse
        return "def propose(task, parent, feedback, tools:\\n    return '" + os.urandom(6).hex() + "'\\n"
    return tools.mutate(parent)
'''


def test_broken_child_agents_get_error_evaluations_and_the_run_goes_on(tmp_path: Path) -> None:
    db = tmp_path / "run.sqlite"
    summary, run_id, rows = run_example(make_example(tmp_path, iterations=3, seed_agent=BROKEN_CHILD), db)
    with LineageStore(db, create=False) as store:
        run = store.get_run(run_id)
    children = [(p, r) for p, r in rows if p.operator != "seed"]
    assert run["status"] == "finished" and summary.stop_reason == "budget"
    assert children and all(r is not None and r.status == "error" for _, r in children)
    assert all("first stage" in (r.error or "") for _, r in children)
    assert dict(summary.extra_rows)["held-out"].startswith(
        "the best agent is the seed agent (none of 3 child agents scored above it on the scoring tasks): held-out ")
