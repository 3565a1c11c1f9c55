"""bench_policy_samples counts calls the same way on the frozen and the trained arm: every
completion the policy generated is one call, whether it was evaluated, a copy or no program;
and its in-process sandbox scores a child exactly as the task's evaluator does."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the joined loop needs the 'rl' extra (torch, transformers)")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_policy_samples as bench  # noqa: E402
import policy_tasks  # noqa: E402

from qdevolve.types import Program  # noqa: E402


@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A very small edit policy, pre-trained a few steps in the module's own cache."""
    from qdevolve.rl.tiny import tiny_policy_dir

    return str(tiny_policy_dir("expr_edit", tmp_path_factory.mktemp("cache"), sft_steps=10, batch_size=16, n_embd=16,
                               n_layer=1, n_head=2, n_positions=64))


def _kinds_in_db(db: Path, calls: int) -> dict[str, int]:
    """The kinds of the first ``calls`` rollouts, read from the database independently of the benchmark."""
    con = sqlite3.connect(db)
    rows = con.execute("SELECT r.metadata, e.status FROM rollouts r LEFT JOIN evaluations e "
                       "ON e.program_id = r.program_id ORDER BY r.seq LIMIT ?", (calls,)).fetchall()
    out = {"evaluated": 0, "copies": 0, "failed": 0}
    for meta, status in rows:
        out["copies" if "duplicate_of" in json.loads(meta) else "evaluated" if status == "ok" else "failed"] += 1
    return out


@pytest.mark.slow
@pytest.mark.parametrize("task_name", ["expr_evolution", "suite:t30"])
def test_both_arms_count_every_completion_as_one_call(tmp_path: Path, policy: str, task_name: str) -> None:
    calls = 72
    task = policy_tasks.prepare_task(task_name, tmp_path)
    runs = {}
    for arm in ("frozen", "grpo"):
        r = bench.run_one(task, arm, calls, 0, policy, tmp_path / arm)
        runs[arm] = r
        # every completion the backend generated is a stored rollout, and the budget was spent in full
        assert r["rollouts"] == r["generated"] >= calls, r
        assert r["evaluated"] + r["copies"] + r["failed"] == calls, r
        assert _kinds_in_db(tmp_path / arm / "qd.sqlite", calls) == {k: r[k] for k in ("evaluated", "copies", "failed")}
        records = [json.loads(line) for line in (tmp_path / arm / "evaluations.jsonl").read_text().splitlines()]
        assert records[0]["call"] == 0, "the seed is call 0"
        children = [x["call"] for x in records[1:]]
        assert children == sorted(set(children)) and children[-1] <= r["rollouts"]
        # one record per evaluated call: a copy or a failed call advances the axis without a point
        assert len([c for c in children if c <= calls]) == r["evaluated"]
        if r["copies"]:
            assert children[:r["evaluated"]] != list(range(1, r["evaluated"] + 1)), "copies must take call numbers"
    assert runs["frozen"]["trainer_steps"] == 0 and runs["frozen"]["versions_sampled"] == 1
    assert runs["grpo"]["trainer_steps"] >= 1, "the trained arm must step within the budget"


def test_sandbox_scores_as_the_task_evaluator(tmp_path: Path) -> None:
    task = policy_tasks.prepare_task("suite:t30", tmp_path)
    ev = policy_tasks.task_evaluator(task)
    assert [y for _, y in ev.VISIBLE] == [1, -1, -5, -11, -29], "1-x*(1+x) on x = 0, 1, 2, 3, 5"
    assert '"0>1,1>-1,2>-5,3>-11,5>-29|{parent}|{tests}:"' in (task / "config.yaml").read_text()
    box = policy_tasks.ExprTaskSandbox(task=str(task))
    for expr in ("x", "1-x*(1+x)", "1-x*x", "x**2", "((x", "x+1+1+1+1+1"):
        code = f'EXPR = "{expr}"\n'
        path = tmp_path / "child.py"
        path.write_text(code)
        want = ev.evaluate(str(path))
        got = box.evaluate(Program(code=code, run_id="t"))
        assert got.ok and got.score == want["combined_score"] and got.tests == want["tests"], expr
        assert got.features == want["features"] and got.artifacts["outputs"] == want["artifacts"]["outputs"], expr
