"""Real OS processes on one SQLite file: concurrent writers and a writer killed mid-batch."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

WRITER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from qdevolve.db.store import LineageStore
    from qdevolve.types import EvalResult, Program

    db, go, worker, n, batch = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    while not go.exists():
        time.sleep(0.005)
    store = LineageStore(db, create=True)
    rid = store.create_run(name=f"w{worker}", run_id=f"run-{worker}")
    prev = None
    for start in range(0, n, batch):
        progs = []
        for i in range(start, min(n, start + batch)):
            p = Program(code=f"w{worker}_{i} = {i}\\n", run_id=rid,
                        parent_ids=(prev,) if prev else (), metadata={"i": i})
            progs.append(p)
            prev = p.id
        store.write(programs=progs, evaluations=[(p.id, EvalResult(score=float(i))) for i, p in enumerate(progs)],
                    run_id=rid, state={"last": start})
    print("done", worker, flush=True)
""")


@pytest.mark.slow
def test_four_processes_write_concurrently_without_losing_rows(tmp_path: Path) -> None:
    db, go = tmp_path / "shared.sqlite", tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(db), str(go), str(w), "2000", "50"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for w in range(4)]
    time.sleep(0.5)  # every process imported and waiting: they start on an empty path together
    go.touch()
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert "locked" not in err.lower(), err
        assert p.returncode == 0, err
        assert out.startswith("done")
    con = sqlite3.connect(db)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = dict(con.execute("SELECT run_id, COUNT(*) FROM programs GROUP BY run_id").fetchall())
        assert rows == {f"run-{w}": 2000 for w in range(4)}
        assert con.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0] == 8000
        assert con.execute("SELECT COUNT(*) FROM edges").fetchone()[0] == 4 * 1999
        assert con.execute("SELECT COUNT(*) FROM qdevolve_schema").fetchone()[0] == 1
    finally:
        con.close()


KILLED = textwrap.dedent("""
    import sys
    from qdevolve.db.store import LineageStore
    from qdevolve.types import EvalResult, Program

    store = LineageStore(sys.argv[1], create=True)
    rid = store.create_run(name="killed", run_id=sys.argv[2])
    batch = 0
    while True:
        head = Program(code=f"{rid} b{batch} head\\n", run_id=rid, metadata={"batch": batch})
        progs = [head] + [Program(code=f"{rid} b{batch}_{i}\\n", run_id=rid, parent_ids=(head.id,),
                                  metadata={"batch": batch}) for i in range(999)]
        store.write(programs=progs, evaluations=[(p.id, EvalResult(score=1.0)) for p in progs],
                    run_id=rid, state={"batch": batch})
        print(batch, flush=True)
        batch += 1
""")


@pytest.mark.slow
@pytest.mark.parametrize("delays", [(0.011, 0.037, 0.073)])
def test_sigkill_mid_batch_leaves_only_whole_batches(tmp_path: Path, delays: tuple[float, ...]) -> None:
    """Three writers in turn, each SIGKILLed at a different point after its 4th commit; the
    next one reopens the same file (recovering the WAL) and appends."""
    db = tmp_path / "killed.sqlite"
    for round_, delay in enumerate(delays):
        rid = f"run-k{round_}"
        proc = subprocess.Popen([sys.executable, "-c", KILLED, str(db), rid], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        committed = -1
        assert proc.stdout is not None
        while committed < 3:
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.stderr else "writer died"
            committed = int(line)
        time.sleep(delay)  # land somewhere inside a later write
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        con = sqlite3.connect(db)
        try:
            assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            per_batch = dict(con.execute(
                "SELECT json_extract(metadata, '$.batch'), COUNT(*) FROM programs WHERE run_id = ? "
                "GROUP BY 1", (rid,)).fetchall())
            assert set(range(committed + 1)) <= set(per_batch)  # every printed batch survived
            assert set(per_batch.values()) == {1000}  # no partial batch
            assert sorted(per_batch) == list(range(len(per_batch)))
            n = sum(per_batch.values())
            assert con.execute("SELECT COUNT(*) FROM evaluations WHERE run_id = ?", (rid,)).fetchone()[0] == n
            assert con.execute("SELECT COUNT(*) FROM edges WHERE run_id = ?", (rid,)).fetchone()[0] == 999 * len(per_batch)
            state = con.execute("SELECT value FROM run_state WHERE run_id = ? AND key = 'batch'", (rid,)).fetchone()[0]
            assert int(state) == len(per_batch) - 1  # run state committed with its batch
        finally:
            con.close()


def _child_write(store: object, run_id: str, n: int) -> None:
    from qdevolve.types import Program

    store.write(programs=[Program(code=f"child {i}\n", run_id=run_id) for i in range(n)])  # type: ignore[attr-defined]


def test_a_forked_child_can_use_the_parents_store(tmp_path: Path) -> None:
    import multiprocessing as mp

    from qdevolve.db.store import LineageStore
    from qdevolve.types import Program

    store = LineageStore(tmp_path / "fork.sqlite", create=True)
    rid = store.create_run(name="fork")
    store.write(programs=[Program(code="parent\n", run_id=rid)])  # the pool now holds a connection
    procs = [mp.get_context("fork").Process(target=_child_write, args=(store, rid, 100)) for _ in range(3)]
    for p in procs:
        p.start()
    store.write(programs=[Program(code=f"parent {i}\n", run_id=rid) for i in range(100)])
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert store.count_programs(rid) == 401
    store.close()
