"""``tell`` is one unit of work: build a record, commit it in one transaction, then apply it.

* When the commit raises (``BudgetSpent``: another controller of the pool took the last
  unit), nothing in memory changed: archive, ensemble bandit statistics, ledger, caches.
* A run killed after any write of a ``tell`` (and of whatever else the engine writes before
  its next plan), or inside its transaction after any table's rows, resumes to the run an
  uninterrupted one makes: same children, same random state, bandit, counters and archive.
  Writing the random or bandit state in a second transaction fails this test.
"""

from __future__ import annotations

import hashlib
import json
import signal
import sqlite3
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from qdevolve.archive.snapshot import encode, snapshot
from qdevolve.db.store import BudgetSpent, LineageStore
from qdevolve.evolve.core.archive_rebuild import rebuild
from qdevolve.evolve.core.engine import Evolution
from qdevolve.evolve.setup.example import load_example
from qdevolve.testing.scripted_server import ScriptedServer
from qdevolve.testing.scripts import ScriptedModel, prompt_of

from ._kill import run_script
from .conftest import QDEVOLVE

ROOT = Path(__file__).resolve().parents[2]
ITERATIONS = 12
TARGET = 6  # the tell (of the killed process) around which the kills land: its 6th child

SEED = '''"""Three constants; the evaluator scores how close they get to (3, -1, 2)."""

# EVOLVE-BLOCK-START
A = 0.5
B = 2.0
C = 1.0
# EVOLVE-BLOCK-END


def values():
    return [A, B, C]
'''

EVALUATOR = '''import importlib.util


def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("cand", program_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    a, b, c = mod.values()
    score = 1.0 / (1.0 + (a - 3) ** 2 + (b + 1) ** 2 + (c - 2) ** 2)
    return {"combined_score": score, "features": {"a": float(a), "b": float(b)}}
'''

CONFIG = '''run:
  iterations: {iterations}
  seed: 5
  workers: 1
  max_pending: 1
{pool}archive:
  type: islands
  n_islands: 2
  migration_interval: 4
  feature_dimensions: [a, b]
  ranges: [[0.0, 1.0], [1.5, 2.5]]
  bins: 8
sandbox:
  type: local
limits:
  wall_s: 20
mutation:
  - {{type: diff, weight: 1.0}}
  - {{type: rewrite, weight: 1.0}}
inspirations: {{n_best: 1, n_diverse: 1}}
backend:
  type: openai
  api_base: {url}
  bandit: true
  bandit_exploration: 0.05
  models:
    - {{name: careful, weight: 1.0}}
    - {{name: bold, weight: 1.0}}
'''


def reply(req: dict[str, Any]) -> str:
    """A pure function of the request, so a request a killed process made changes nothing."""
    model = str(req.get("model"))
    blocks = [ln for ln in prompt_of(req).splitlines() if ln[:2] in ("A ", "B ", "C ")]
    key = hashlib.sha256(f"{model}\n{req.get('seed')}\n{chr(10).join(blocks)}".encode()).hexdigest()
    return ScriptedModel(seed=int(key[:12], 16), edits=3 if model == "bold" else 1)(req)


def _example(root: Path, url: str, pool: str = "") -> Path:
    root.mkdir(parents=True)
    (root / "initial_program.py").write_text(SEED)
    (root / "evaluator.py").write_text(EVALUATOR)
    (root / "config.yaml").write_text(CONFIG.format(iterations=ITERATIONS, url=url, pool=pool))
    return root


# -- nothing changes in memory when the commit fails ------------------------------------------
def _memory(evo: Evolution) -> dict[str, Any]:
    led = evo.ledger
    return {"archive": encode(snapshot(evo.archive)), "ensemble": evo.backend.state(),
            "ledger": (led.evaluated, led.stored, led.best_score, led.best_id, dict(led.by_status)),
            "cache": sorted(evo.cache._items), "unevaluated": sorted(evo._stored_unevaluated)}


@pytest.mark.slow
def test_budget_spent_in_the_commit_changes_nothing_in_memory(tmp_path: Path, monkeypatch: Any) -> None:
    with ScriptedServer(reply) as server:
        ex = load_example(_example(tmp_path / "ex", server.url, pool=f"  budget_pool: p{uuid.uuid4().hex[:6]}\n"))
        store = LineageStore(tmp_path / "pool.sqlite")
        evo = Evolution.start(ex, ex.config, store, progress=False)
        seen: dict[str, Any] = {}
        orig_tell, orig_write = evo.tell, store.write
        calls = {"n": 0}

        def tell(program: Any, result: Any, **kw: Any) -> Any:
            calls["n"] += 1
            if calls["n"] != 4 or kw.get("child") is None:
                return orig_tell(program, result, **kw)
            seen["before"] = _memory(evo)
            reported = []
            monkeypatch.setattr(evo.backend, "report", lambda m, r: (reported.append(m), type(evo.backend).report(
                evo.backend, m, r)))

            def spent(**rows: Any) -> None:
                raise BudgetSpent("another controller took the last unit")

            monkeypatch.setattr(store, "write", spent)
            try:
                events = orig_tell(program, result, **kw)
            finally:
                monkeypatch.setattr(store, "write", orig_write)
            seen.update(after=_memory(evo), events=events, reported=reported)
            return events

        evo.tell = tell  # type: ignore[method-assign]
        try:
            evo.run()
        finally:
            evo.close()
        assert seen["events"] == []
        assert seen["reported"], "the bandit was credited before the commit (and put back)"
        for key in seen["before"]:
            assert seen["after"][key] == seen["before"][key], key
        assert evo.ledger.stop_reason and "pool" in evo.ledger.stop_reason
        assert store.count_evaluations(evo.run_id) == 1 + 3  # the seed and the children before the 4th tell
        store.close()


# -- kill between every pair of writes, then resume ---------------------------------------------
KILL_SCRIPT = r'''
from qdevolve.evolve.core.engine import Evolution

db, url, example, target = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
st["tells"] = 0
orig_tell, orig_ask = Evolution.tell, Evolution.ask


def tell(self, *a, **kw):
    st["tells"] += 1
    if st["tells"] == target:
        st["window"] = True  # from this tell until the engine's next plan
    return orig_tell(self, *a, **kw)


def ask(self, *a, **kw):
    end_window()
    return orig_ask(self, *a, **kw)


Evolution.tell, Evolution.ask = tell, ask
from qdevolve.evolve.setup.example import load_example
store = LineageStore(db)
ex = load_example(example)
evo = Evolution.start(ex, ex.config, store, progress=False)
evo.run()
'''


def _outcome(db: Path) -> dict[str, Any]:
    """Children by position (operator, island, parents and inspirations by position, model,
    code, status, score), the stored rng/bandit/counters, and the archive rebuilt from the store."""
    con = sqlite3.connect(db)
    try:
        assert con.execute("SELECT status FROM runs").fetchone()[0] == "finished"
        rows = con.execute("SELECT p.id, p.operator, p.island, p.code_hash, p.metadata, e.status, e.score "
                           "FROM programs p JOIN evaluations e ON e.program_id = p.id ORDER BY e.id").fetchall()
        pos = {r[0]: i for i, r in enumerate(rows)}
        edges: dict[str, dict[str, list[int]]] = {}
        for parent, child, role in con.execute("SELECT parent_id, child_id, role FROM edges"):
            edges.setdefault(child, {}).setdefault(role, []).append(pos[parent])
        children = [(op, island, {r: sorted(v) for r, v in edges.get(pid, {}).items()},
                     (json.loads(meta).get("usage") or {}).get("model"), code_hash, status,
                     None if score is None else round(score, 12))
                    for pid, op, island, code_hash, meta, status, score in rows]
        state = {k: json.loads(v) for k, v in con.execute("SELECT key, value FROM run_state")
                 if k in ("rng", "ensemble", "counters")}
    finally:
        con.close()
    with LineageStore(db, create=False) as store:
        archive = rebuild(store, None, points=1)[1].archive
    elites = sorted((pos[e.program_id], e.island, str(e.cell), round(e.score, 12)) for e in archive.elites())
    stats = json.dumps(archive.stats(), sort_keys=True, default=str)
    for pid, i in pos.items():  # program ids are random: compare by position
        stats = stats.replace(pid, f"#{i}")
    return {"children": children, "state": state, "archive": elites, "stats": stats}


def _script(tmp_path: Path, db: Path, url: str, point: str, ex: Path) -> subprocess.CompletedProcess[str]:
    return run_script(tmp_path / "kill_tell.py", KILL_SCRIPT, [str(db), url, str(ex), str(TARGET)], point)


@pytest.mark.slow
def test_kill_between_every_pair_of_writes_resumes_to_the_uninterrupted_run(tmp_path: Path) -> None:
    with ScriptedServer(reply) as server:
        ex = _example(tmp_path / "ex", server.url)
        whole_db = tmp_path / "whole.sqlite"
        r = subprocess.run([*QDEVOLVE, "run", str(ex), "--sandbox", "local", "--db", str(whole_db), "--no-progress", "--trust", "backend.api_base"],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        whole = _outcome(whole_db)
        probe = _script(tmp_path, tmp_path / "probe.sqlite", server.url, "count", ex)
        assert probe.returncode == -signal.SIGKILL, probe.stderr[-3000:]
        counts = probe.stdout.split()
        commits, inserts = int(counts[1]), int(counts[3])
        assert commits >= 1 and inserts >= 4, probe.stdout  # program, edges, evaluation, events, rollout...
        points = [f"in:{k}" for k in range(1, inserts + 1)] + [f"after:{k}" for k in range(1, commits + 1)]
        for point in points:
            db = tmp_path / f"cut-{point.replace(':', '-')}.sqlite"
            r = _script(tmp_path, db, server.url, point, ex)
            assert r.returncode == -signal.SIGKILL, (point, r.stderr[-3000:])
            r = subprocess.run([*QDEVOLVE, "resume", "--db", str(db), "--no-progress", "--trust", "backend.api_base"],
                               capture_output=True,
                               text=True, timeout=300)
            assert r.returncode == 0, (point, r.stderr[-3000:])
            cut = _outcome(db)
            assert len(cut["children"]) == len(whole["children"]) == ITERATIONS + 1, point
            for i, (a, b) in enumerate(zip(whole["children"], cut["children"], strict=True)):
                assert a == b, f"killed at {point}: child {i}: uninterrupted {a} != resumed {b}"
            for key in ("rng", "ensemble", "counters"):
                assert cut["state"][key] == whole["state"][key], (point, key)
            assert cut["archive"] == whole["archive"], point
            assert cut["stats"] == whole["stats"], point
