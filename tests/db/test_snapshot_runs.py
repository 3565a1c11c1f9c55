"""Real runs store archive snapshots; ``archive stats`` from the newest usable snapshot plus
the tail equals a full replay (also from a stale snapshot, after SIGKILL and resume, and
when a covered program was evaluated again); databases of schema v2 still work."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from qdevolve.archive.replay import replay
from qdevolve.archive.snapshot import encode, snapshot
from qdevolve.db import snapshots, streams
from qdevolve.db._version import SCHEMA_VERSION
from qdevolve.db.store import LineageStore, open_store
from qdevolve.evolve.core.archive_rebuild import code_features, rebuild
from qdevolve.types import EvalResult

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
import time


def evaluate(program_path):
    time.sleep(SLEEP)
    spec = importlib.util.spec_from_file_location("cand", program_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return {"combined_score": float(mod.value()), "features": {"a": float(mod.A), "b": float(mod.B)}}
'''

ARCHIVES = {
    "map_elites": "{type: map_elites, feature_dimensions: [a, code_length], bins: 4}",
    "islands": "{type: islands, n_islands: 2, migration_interval: 3, migration_fraction: 0.5, "
               "feature_dimensions: [a, diversity], bins: 3}",
    "novelty": "{type: novelty, feature_dimensions: [a, b], k: 3, threshold: 0.05, max_size: 8}",
    "dgm": "{type: dgm, feature_dimensions: [a, b], max_size: 10}",
}


def _example(tmp_path: Path, archive: str, iterations: int, workers: int = 1, sleep: float = 0.0) -> Path:
    ex = tmp_path / "ex"
    ex.mkdir(exist_ok=True)
    (ex / "initial_program.py").write_text(SEED)
    (ex / "evaluator.py").write_text(EVALUATOR.replace("SLEEP", repr(sleep)))
    (ex / "config.yaml").write_text(
        f"run:\n  iterations: {iterations}\n  seed: 3\n  workers: {workers}\narchive: {ARCHIVES[archive]}\n"
        "selection: {type: dgm, center: median}\nmutation: {type: ast}\nsandbox: {type: local}\n"
        "limits:\n  wall_s: 10\n")
    return ex


def _env(every: int) -> dict[str, str]:
    return {**os.environ, "QDEVOLVE_SNAPSHOT_EVERY": str(every), "PYTHONPATH": os.getcwd()}


def _run(ex: Path, db: Path, every: int = 4) -> None:
    proc = subprocess.run([sys.executable, "-m", "qdevolve", "run", str(ex), "--sandbox", "local", "--db", str(db), "--no-progress"],
                          capture_output=True, text=True, timeout=300, env=_env(every))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _full(store: LineageStore, rid: str):
    spec = store.get_run(rid)["config"]["archive"]
    return replay(spec, streams.replay_stream(store, rid, code_features=code_features(spec)), record_every=10**9)


def _assert_same(store: LineageStore, rid: str, *, used_snapshot: bool, least: int = 20) -> None:
    full = _full(store, rid)
    snap = snapshots.latest(store, rid)
    assert (snap is not None) == used_snapshot
    _run_row, fast = rebuild(store, rid, points=1)
    a, b = full.archive, fast.archive
    assert encode(a.stats()) == encode(b.stats())
    assert encode(snapshot(a)) == encode(snapshot(b))
    assert (full.programs, full.evaluated, full.by_status, full.events) == \
        (fast.programs, fast.evaluated, fast.by_status, fast.events)
    assert full.evaluated >= least


@pytest.mark.slow
@pytest.mark.parametrize(("name", "workers"), [("map_elites", 1), ("islands", 2), ("novelty", 1), ("dgm", 2)])
def test_stats_from_a_snapshot_equal_a_full_replay(tmp_path: Path, name: str, workers: int) -> None:
    db = tmp_path / "run.sqlite"
    _run(_example(tmp_path, name, 30, workers), db)
    with open_store(db) as store:
        rid = store.latest_run_id()
        rows = store.execute("SELECT id, eval_id FROM archive_snapshots WHERE run_id = :r ORDER BY id", r=rid)
        assert len(rows) == snapshots.KEEP  # older ones are dropped
        last_eval = store.execute("SELECT MAX(id) FROM evaluations")[0][0]
        assert rows[-1][1] < last_eval  # there is a tail to replay
        _assert_same(store, rid, used_snapshot=True)
        # a stale snapshot (the newest one gone) plus a longer tail: the same archive
        with store._begin() as c:
            c.exec_driver_sql("DELETE FROM archive_snapshots WHERE id = ?", (rows[-1][0],))
        _assert_same(store, rid, used_snapshot=True)
        # a covered program evaluated again moves in the replay order: the snapshot is not used
        first = store.execute("SELECT program_id FROM evaluations WHERE run_id = :r ORDER BY id LIMIT 1 OFFSET 3",
                              r=rid)[0][0]
        store.add_evaluation(first, EvalResult(status="error", error="re-run"))
        _assert_same(store, rid, used_snapshot=False)


@pytest.mark.slow
def test_sigkill_and_resume_keep_snapshots_consistent(tmp_path: Path) -> None:
    db = tmp_path / "run.sqlite"
    ex = _example(tmp_path, "islands", 60, workers=2, sleep=0.05)
    proc = subprocess.Popen([sys.executable, "-m", "qdevolve", "run", str(ex), "--sandbox", "local", "--db", str(db), "--no-progress"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_env(3))
    deadline = time.time() + 120
    n = 0
    while time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
        try:
            con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
            n = con.execute("SELECT COUNT(*) FROM archive_snapshots").fetchone()[0]
            con.close()
        except sqlite3.Error:
            continue
        if n >= 2:
            break
    assert proc.poll() is None, "the run ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert n >= 2
    with open_store(db) as store:
        rid = store.latest_run_id()
        assert store.count_evaluations(rid) < 61
        _assert_same(store, rid, used_snapshot=True, least=6)
    out = subprocess.run([sys.executable, "-m", "qdevolve", "resume", "--db", str(db), "--no-progress"],
                         capture_output=True, text=True, timeout=300, env=_env(3))
    assert out.returncode == 0, out.stdout + out.stderr
    with open_store(db) as store:
        assert store.count_evaluations(rid) == 61
        _assert_same(store, rid, used_snapshot=True)


def test_a_schema_v2_database_is_upgraded_and_replayed_in_full(tmp_path: Path) -> None:
    db = tmp_path / "old.sqlite"
    st = LineageStore(db, create=True)
    rid = st.create_run(name="old", config={"archive": {"type": "map_elites", "feature_dimensions": ["w"]}})
    from qdevolve.types import Program

    seed = Program(code="a = 1\n", run_id=rid)
    kids = [Program(code=f"a = {i}\n", run_id=rid, parent_ids=(seed.id,), operator="diff") for i in range(2, 9)]
    st.write(programs=[seed, *kids],
             evaluations=[(p.id, EvalResult(score=float(i), features={"w": i % 3})) for i, p in enumerate([seed, *kids])])
    st.close()
    con = sqlite3.connect(db)
    con.execute("DROP TABLE archive_snapshots")
    con.execute("UPDATE qdevolve_schema SET version = 2")
    con.commit()
    con.close()
    with open_store(db) as store:
        assert store.execute("SELECT MAX(version) FROM qdevolve_schema")[0][0] == SCHEMA_VERSION
        assert snapshots.latest(store, rid) is None
        _run_row, rep = rebuild(store, rid, points=1)
        assert rep.evaluated == 8 and rep.archive.stats()["size"] == 3
