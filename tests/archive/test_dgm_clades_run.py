"""A real run with ``hgm`` selection over a ``dgm`` archive: the live archive's clade
statistics (its stored snapshots), a resume's rebuild (snapshot plus the evaluations after
it) and a full replay of the store all agree."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from qdevolve.archive.replay import replay
from qdevolve.archive.snapshot import FORMAT, encode, restore, snapshot
from qdevolve.cli.archive import replay_rows
from qdevolve.db import snapshots
from qdevolve.db.store import open_store
from qdevolve.evolve.core.archive_rebuild import rebuild

SEED = '''"""Maximise the number of A and B values close to 3."""

# EVOLVE-BLOCK-START
A = 0.5
B = 2.0
C = 1.0
# EVOLVE-BLOCK-END
'''

EVALUATOR = '''import importlib.util


def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("cand", program_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    tests = [max(0.0, 1.0 - abs(float(v) - 3.0) / 3.0) for v in (mod.A, mod.B, mod.C)]
    return {"combined_score": sum(tests) / 3, "tests": tests}
'''


def _clades(archive) -> list[tuple]:  # type: ignore[no-untyped-def]
    return [(e.program_id, e.parent_id, e.clade_successes, e.clade_trials) for e in archive.elites()]


@pytest.mark.slow
def test_live_resumed_and_replayed_clades_agree(tmp_path: Path) -> None:
    ex = tmp_path / "ex"
    ex.mkdir()
    (ex / "initial_program.py").write_text(SEED)
    (ex / "evaluator.py").write_text(EVALUATOR)
    (ex / "config.yaml").write_text(
        "run:\n  iterations: 16\n  seed: 5\n  workers: 1\narchive: {type: dgm}\n"
        "selection: {type: hgm, tau: 2.0}\nmutation: {type: ast}\nsandbox: {type: local}\nlimits:\n  wall_s: 10\n")
    db = tmp_path / "run.sqlite"
    proc = subprocess.run([sys.executable, "-m", "qdevolve", "run", str(ex), "--sandbox", "local", "--db", str(db), "--no-progress"],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "QDEVOLVE_SNAPSHOT_EVERY": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open_store(db) as store:
        rid = store.latest_run_id()
        spec = store.get_run(rid)["config"]["archive"]
        rows = replay_rows(store, rid)
        snap = snapshots.latest(store, rid, fmt=FORMAT)
        resumed = rebuild(store, rid, points=1)[1].archive  # what a resume starts from
        streamed = rebuild(store, rid, points=400)[1].archive  # a full replay of the stored rows
    assert snap is not None and snap.evaluations > 1
    live = restore(spec, snap.state)  # the engine's own archive after a tell
    assert _clades(live) == _clades(replay(spec, rows[:snap.evaluations]).archive)
    full = replay(spec, rows).archive
    assert _clades(resumed) == _clades(streamed) == _clades(full)
    assert encode(snapshot(resumed)) == encode(snapshot(full))
    root = full.elites()[0]
    assert root.parent_id is None and root.clade_trials >= len(rows) > 1  # each evaluation: 1 or 3 trials
    assert 0 < root.clade_successes < root.clade_trials
