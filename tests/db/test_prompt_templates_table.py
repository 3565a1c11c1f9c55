"""The ``prompt_templates`` table: written in the same transaction as the rest of a batch,
read back in order, added to a schema-v3 database on open, and bounded in size."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from qdevolve.db.store import BudgetSpent, LineageStore, open_store
from qdevolve.types import EvalResult, Program, PromptTemplate


def test_templates_commit_with_the_batch_or_not_at_all(tmp_path: Path) -> None:
    st = LineageStore(tmp_path / "t.sqlite")
    rid = st.create_run(name="t")
    st.init_budget(rid, 0)
    seed = PromptTemplate(id="s", name="diff_user", text="{current_program}")
    kid = PromptTemplate(id="k", name="diff_user", text="{current_program}\nmore", parent_id="s", origin="offline",
                         status="invalid", reason="why", generation=1, metadata={"edit": "add"})
    p = Program(code="a = 1\n", run_id=rid)
    st.write(run_id=rid, programs=[p], evaluations=[(p.id, EvalResult(score=1.0))], templates=[seed, kid],
             budget=(rid, 1, 1))
    q = Program(code="a = 2\n", run_id=rid)
    with pytest.raises(BudgetSpent):  # the budget is spent: nothing of this batch is stored, templates neither
        st.write(run_id=rid, programs=[q], evaluations=[(q.id, EvalResult(score=2.0))],
                 templates=[PromptTemplate(id="x", name="diff_user", text="{current_program}")], budget=(rid, 1, 1))
    got = st.prompt_templates(rid)
    assert [t.id for t in got] == ["s", "k"]
    assert (got[1].parent_id, got[1].status, got[1].reason, got[1].metadata) == ("s", "invalid", "why", {"edit": "add"})
    huge = PromptTemplate(id="h", name="diff_user", text="x" * 1_000_000)
    st.write(run_id=rid, templates=[huge])
    assert len(st.prompt_templates(rid)[-1].text) <= 64_000, "a stored template is bounded"


def test_a_v3_database_gains_the_table(tmp_path: Path) -> None:
    db = tmp_path / "old.sqlite"
    st = LineageStore(db)
    rid = st.create_run(name="old")
    st.close()
    con = sqlite3.connect(db)
    con.execute("DROP TABLE prompt_templates")
    con.execute("DELETE FROM qdevolve_schema")
    con.execute("INSERT INTO qdevolve_schema VALUES (3, 'old', 0)")
    con.commit()
    con.close()
    with open_store(db) as store:
        assert store.prompt_templates(rid) == []
        store.write(run_id=rid, templates=[PromptTemplate(id="s", name="diff_user", text="{metrics}")])
        assert [t.id for t in store.prompt_templates(rid)] == ["s"]
