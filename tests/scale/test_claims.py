"""Budget and evaluation claims shared by several controllers on one database."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from qdevolve.db import claims
from qdevolve.db import schema as S
from qdevolve.db.store import LineageStore
from qdevolve.types import EvalResult, Program

WORKER = """
import json, sys, time
from sqlalchemy import insert
from qdevolve.db import claims, schema as S
from qdevolve.db.store import LineageStore
from qdevolve.types import new_id

target, rid, total, start_at, me = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
ids = json.loads(sys.argv[6])
st = LineageStore(target, create=False)
time.sleep(max(0.0, start_at - time.time()))
got = []
while True:
    with st._begin() as c:
        if not claims.take_budget(c, rid, 1, total):
            break
        pid = new_id()
        c.execute(insert(S.programs).values(id=pid, run_id=rid, code=me, code_hash=pid,
                                            operator="diff", created_at=time.time(), metadata="{}"))
        got.append(pid)
mine = []
for pid in ids:
    with st._begin() as c:
        if claims.claim_program(c, rid, pid, me, lease_s=600):
            mine.append(pid)
st.close()
print(json.dumps({"got": got, "mine": mine}))
"""


def _fresh(target: str) -> LineageStore:
    if "://" in target:
        from sqlalchemy import create_engine

        eng = create_engine(target)
        S.metadata.drop_all(eng)
        eng.dispose()
    return LineageStore(target, create=True)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return str(tmp_path / "claims.sqlite") if request.param == "sqlite" else request.getfixturevalue("pg_url")


@pytest.mark.slow
def test_two_controller_processes_never_double_count(target: str) -> None:
    total = 150
    st = _fresh(target)
    rid = st.create_run(name="shared")
    waiting = [Program(code=f"x = {i}\n", run_id=rid) for i in range(60)]
    st.write(programs=waiting)
    with st._begin() as c:
        claims.init_budget(c, rid, 0)
    st.close()
    ids = json.dumps([p.id for p in waiting])
    start_at = time.time() + 4.0  # both processes are imported and connected by then
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, target, rid, str(total), str(start_at), me, ids],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for me in ("ctl-a", "ctl-b")]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err[-3000:]
        outs.append(json.loads(out))
    got = [pid for o in outs for pid in o["got"]]
    assert len(got) == total and len(set(got)) == total  # no unit of budget taken twice
    st = LineageStore(target, create=False)
    try:
        rows = st.execute("SELECT code, COUNT(*) FROM programs WHERE run_id = :r AND operator = 'diff' "
                          "GROUP BY code", r=rid)
        assert sum(n for _, n in rows) == total  # every claimed child stored, none lost
        with st._connect() as c:
            assert claims.budget_stored(c, rid) == total
        mine_a, mine_b = set(outs[0]["mine"]), set(outs[1]["mine"])
        assert not mine_a & mine_b  # each waiting program evaluated by one controller
        assert mine_a | mine_b == {p.id for p in waiting}
    finally:
        st.close()


def test_budget_claim_rolls_back_with_its_transaction(tmp_path: Path) -> None:
    st = LineageStore(tmp_path / "r.sqlite", create=True)
    rid = st.create_run(name="r")
    with st._begin() as c:
        claims.init_budget(c, rid, 3)
        claims.init_budget(c, rid, 99)  # an existing counter is kept
    with pytest.raises(RuntimeError), st._begin() as c:
        assert claims.take_budget(c, rid, 2, total=5)
        raise RuntimeError("controller died before the children were stored")
    with st._begin() as c:
        assert claims.budget_stored(c, rid) == 3
        assert claims.take_budget(c, rid, 2, total=5)
        assert not claims.take_budget(c, rid, 1, total=5)
        assert claims.budget_stored(c, rid) == 5
    st.close()


def test_program_claims_expire_and_are_taken_over(tmp_path: Path) -> None:
    st = LineageStore(tmp_path / "r.sqlite", create=True)
    rid = st.create_run(name="r")
    p = Program(code="x = 1\n", run_id=rid)
    st.write(programs=[p])
    with st._begin() as c:
        assert claims.claim_program(c, rid, p.id, "a", lease_s=10, now=100.0)
        assert not claims.claim_program(c, rid, p.id, "b", lease_s=10, now=105.0)
        assert claims.claim_program(c, rid, p.id, "a", lease_s=10, now=105.0)  # renewal
        assert claims.claimed_by(c, rid, p.id, now=110.0) == "a"
        assert claims.claim_program(c, rid, p.id, "b", lease_s=10, now=120.0)  # a's lease ran out
        assert claims.claimed_by(c, rid, p.id, now=121.0) == "b"
    st.write(evaluations=[(p.id, EvalResult(score=1.0))])
    with st._begin() as c:
        claims.release_program(c, rid, p.id)
        assert claims.claimed_by(c, rid, p.id, now=121.0) is None
    st.close()
