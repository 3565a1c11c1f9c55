"""A real ``qdevolve run``: replaying its stored programs reproduces its archive events."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from qdevolve import registry
from qdevolve.cli.archive import replay_rows
from qdevolve.db.store import open_store

SEED = '''"""Maximise f(a, b) = -(a - 3)^2 - (b + 1)^2."""

# EVOLVE-BLOCK-START
A = 0.5
B = 2.0
if A > 10:
    B = B * 2
# EVOLVE-BLOCK-END


def value():
    return -(A - 3) ** 2 - (B + 1) ** 2
'''

EVALUATOR = '''import importlib.util


def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("cand", program_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return {"combined_score": float(mod.value()), "features": {"a": float(mod.A), "b": float(mod.B)}}
'''

# OpenEvolve's pattern: feature dimensions read from the evaluator's metrics, and the
# `complexity` built-in (code length); `archive stats` must place these rows as the run did.
EVALUATOR_METRICS = '''import importlib.util


def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("cand", program_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return {"combined_score": float(mod.value()), "a": float(mod.A)}
'''

ARCHIVES = {
    "metrics_features": "{type: map_elites, feature_dimensions: [a, complexity], bins: 4}",
    "map_elites_running": "{type: map_elites, feature_dimensions: [a, code_length], bins: 4}",
    "islands": "{type: islands, n_islands: 2, migration_interval: 3, migration_fraction: 0.5, "
               "feature_dimensions: [a, b], bins: 3}",
}


@pytest.mark.parametrize(("name", "workers"), [("map_elites_running", 1), ("islands", 1), ("islands", 2),
                                              ("metrics_features", 1)])
@pytest.mark.slow
def test_replay_reproduces_the_runs_events(tmp_path: Path, name: str, workers: int) -> None:
    ex = tmp_path / "ex"
    ex.mkdir()
    (ex / "initial_program.py").write_text(SEED)
    (ex / "evaluator.py").write_text(EVALUATOR_METRICS if name == "metrics_features" else EVALUATOR)
    (ex / "config.yaml").write_text(
        f"run:\n  iterations: 24\n  seed: 3\n  workers: {workers}\narchive: {ARCHIVES[name]}\n"
        "selection: {type: dgm, center: median}\nmutation: {type: ast}\nsandbox: {type: local}\n"
        "limits:\n  wall_s: 10\n")
    db = tmp_path / "run.sqlite"
    proc = subprocess.run([sys.executable, "-m", "qdevolve", "run", str(ex), "--sandbox", "local", "--db", str(db), "--no-progress"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open_store(db) as store:
        run_id = store.latest_run_id()
        spec = store.get_run(run_id)["config"]["archive"]
        rows = replay_rows(store, run_id)  # evaluation order: workers finish out of program order
        stored = [(e.program_id, e.kind, e.island, e.cell, e.replaced_id) for e in store.archive_events(run_id)]
    seed_id = next(p.id for _, p, _ in rows if not p.parent_ids)
    arc = registry.archive.create(spec)
    replayed = []
    for _, prog, res in rows:
        assert res is not None
        replayed += [(e.program_id, e.kind, e.island, e.cell, e.replaced_id) for e in arc.add(prog, res)]
    # the engine stores the seed without its archive events; everything after matches exactly
    assert [e for e in replayed if e[0] != seed_id] == [e for e in stored if e[0] != seed_id]
    kinds = {e[1] for e in stored}
    assert "improved" in kinds or "removed" in kinds
    if name == "islands":
        assert "migrated" in kinds
    out = subprocess.run([sys.executable, "-m", "qdevolve", "archive", "stats", "--db", str(db), "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["stats"]["best_program_id"] == arc.stats()["best_program_id"]
    assert got["evaluations"] == 25 and got["stats"]["size"] == arc.stats()["size"]
    assert got["stats"]["qd_score"] == pytest.approx(arc.stats()["qd_score"])
