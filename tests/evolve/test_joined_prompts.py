"""Joined runs end to end: the real engine, a real tiny edit policy (pre-trained for seconds in
the test's own cache), the transformers backend, the trainer and the local sandbox.

* every rollout's prompt shows its parent (expression and pass bits), across >= 3 policy
  versions, copies of stored programs included (their rollout names the parent it was asked of);
* copies reach the trainer: their rollouts are stored with the lazy/duplicate penalty and
  fill the groups; ``train.max_samples`` stops the run at the sample budget;
* ES runs in the joined loop: one perturbed policy per group, a version per population.
"""

from __future__ import annotations

import re
import sqlite3
import subprocess
from pathlib import Path

import pytest
import yaml

from .conftest import QDEVOLVE

pytest.importorskip("torch", reason="the joined loop needs the 'rl' extra (torch, transformers)")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "expr_evolution"


@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small edit policy, pre-trained briefly in the module's own cache (shared by its tests)."""
    from qdevolve.rl.tiny import tiny_policy_dir

    return tiny_policy_dir("expr_edit", tmp_path_factory.mktemp("cache"), sft_steps=40, batch_size=32, n_embd=32,
                           n_positions=64)


def _run(tmp_path: Path, policy: Path, name: str, iterations: int, **train: object) -> Path:
    config = yaml.safe_load((EXAMPLE / "config.yaml").read_text())
    config["train"].update(policy=str(policy), **train)
    config["run"].update(workers=1, max_duplicate_streak=10**6)
    cfg = tmp_path / f"{name}.yaml"
    cfg.write_text(yaml.safe_dump(config))
    db = tmp_path / f"{name}.sqlite"
    r = subprocess.run([*QDEVOLVE, "run", str(EXAMPLE), "--config", str(cfg), "--db", str(db),
                        "--iterations", str(iterations), "--sandbox", "local", "--no-progress"],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    return db


@pytest.mark.slow
def test_joined_rollouts_show_the_parent_in_every_prompt_and_copies_are_trained_on(tmp_path: Path,
                                                                                    policy: Path) -> None:
    from qdevolve.db import open_store

    db = _run(tmp_path, policy, "grpo", 1000, every=16, objective={"type": "grpo"}, max_samples=96,
              shaping={"lazy": -0.3, "duplicate": -0.2})
    store = open_store(db)
    run_id = store.latest_run_id()
    rollouts = [ro for _seq, ro in store.rollouts(run_id)]
    assert 96 <= len(rollouts) < 96 + 2 * 8, "train.max_samples stops the run within a group or two of the budget"
    versions, parents = set(), set()
    for ro in rollouts:
        parent = store.get_program(ro.metadata["parent_ids"][0])
        parent_expr = re.search(r'EXPR = "(.*)"', parent.code).group(1)
        bits = "".join("1" if t >= 0.5 else "0" for t in store.get_evaluation(parent.id).tests)
        assert ro.prompt == f"0>1,1>4,2>7,3>10,5>16|{parent_expr}|{bits}:", (ro.prompt, parent_expr, bits)
        assert ro.reward is not None
        versions.add(ro.policy_version)
        parents.add(parent_expr)
    assert len(versions) >= 3, f"rollouts from policy versions {sorted(versions)}"
    assert len(parents) >= 2, "parent selection changes the prompt"
    copies = [ro for ro in rollouts if ro.metadata.get("duplicate_of")]
    assert copies, "the policy proposed no copy in 96 samples (the base copies its parent ~5% of the time)"
    for ro in copies:
        original = store.get_program(ro.program_id)
        child_expr = ro.completion.strip()
        assert re.search(r'EXPR = "(.*)"', original.code).group(1).replace(" ", "") == child_expr.replace(" ", "")
        lazy = ro.metadata["parent_ids"][0] == original.id
        assert ro.reward == (-0.3 if lazy else -0.2), (ro.reward, lazy)
    n_programs = len([p for _, p, _ in store.iter_programs(run_id) if p.operator == "policy"])
    assert n_programs + len(copies) == len(rollouts), "a rollout per sample: stored children plus copies"
    # the trainer's groups hold the copies: every group of 8 samples is whole in the store
    sizes = {}
    for ro in rollouts:
        sizes[ro.group_id] = sizes.get(ro.group_id, 0) + 1
    assert sorted(set(sizes.values()))[-1] == 8 and sum(v == 8 for v in sizes.values()) >= len(sizes) - 1
    store.close()


@pytest.mark.slow
def test_es_in_the_joined_loop_one_group_per_member(tmp_path: Path, policy: Path) -> None:
    db = _run(tmp_path, policy, "es", 1000, objective={"type": "es", "population": 2, "sigma": 0.01, "alpha": 0.01},
              max_samples=64)
    con = sqlite3.connect(db)
    rows = con.execute("SELECT version, objective, metrics FROM policy_versions ORDER BY version").fetchall()
    assert len(rows) >= 4 and all(r[1] == "es" for r in rows), rows  # base + one per 2 groups of 8
    import json

    steps = [json.loads(r[2]) for r in rows[1:]]
    assert [int(m["es_iteration"]) for m in steps] == list(range(len(steps)))
    # each version's samples come from one population (2 groups), no group straddles an update
    per_version = dict(con.execute("SELECT policy_version, COUNT(DISTINCT group_id) FROM rollouts "
                                   "GROUP BY policy_version").fetchall())
    assert all(n <= 2 for n in per_version.values()), per_version
    members = {m for (m,) in con.execute("SELECT json_extract(metadata, '$.es_member') FROM rollouts")}
    assert members == {0, 1}, members  # a typed field, not text in the model name
    models = {m for (m,) in con.execute("SELECT json_extract(metadata, '$.model') FROM rollouts")}
    assert not any("#es" in str(m) for m in models), models


@pytest.mark.slow
def test_no_train_runs_the_same_joined_example_as_a_control(tmp_path: Path, policy: Path) -> None:
    """``--no-train``: the policy operator samples the base for every child, rollouts are stored
    and rewarded, and no trainer step is taken (one policy version: the base)."""
    from qdevolve.db import open_store

    config = yaml.safe_load((EXAMPLE / "config.yaml").read_text())
    config["train"].update(policy=str(policy), every=8)
    config["run"].update(workers=1, max_duplicate_streak=10**6)
    cfg = tmp_path / "control.yaml"
    cfg.write_text(yaml.safe_dump(config))
    db = tmp_path / "control.sqlite"
    r = subprocess.run([*QDEVOLVE, "run", str(EXAMPLE), "--config", str(cfg), "--db", str(db), "--iterations", "24",
                        "--sandbox", "local", "--no-progress", "--no-train"], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    store = open_store(db)
    run_id = store.latest_run_id()
    assert [v["version"] for v in store.policy_versions(run_id)] == [0]
    rollouts = [ro for _seq, ro in store.rollouts(run_id)]
    assert len(rollouts) >= 24 and {ro.policy_version for ro in rollouts} == {0}
    assert all(ro.reward is not None for ro in rollouts)
    assert store.get_run(run_id)["config"]["train"]["enabled"] is False
    bad = subprocess.run([*QDEVOLVE, "run", str(ROOT / "examples" / "function_minimization"), "--no-train",
                          "--db", str(tmp_path / "x.sqlite")], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "--no-train" in bad.stderr and "trains no policy" in bad.stderr
