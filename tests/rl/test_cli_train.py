"""``qdevolve train`` / ``eval-policy`` as real subprocesses on a real SQLite database."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from qdevolve.db.store import open_store

TINY = ["--sft-steps", "10", "--prompts-per-step", "2", "--group-size", "4"]


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "qdevolve", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)


@pytest.mark.slow
def test_train_then_eval_policy(tmp_path: Path) -> None:
    db, cache = tmp_path / "rl.sqlite", tmp_path / "cache"
    r = _run("train", "--task", "multi_answer", "--objective", "ips", "--objective-arg", "alpha=0.5",
             "--trainer-arg", "learning_rate=1e-4", "--steps", "2", "--db", str(db), "--cache-dir", str(cache),
             "--save-every", "1", *TINY, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "stored policy version 2" in r.stdout
    store = open_store(db)
    run_id = store.latest_run_id()
    versions = store.policy_versions(run_id)
    assert [v["version"] for v in versions] == [0, 1, 2] and versions[2]["objective"] == "ips"
    rollouts = store.rollouts(run_id)
    assert len(rollouts) == 2 * 2 * 4 and all(r.reward is not None and r.token_ids for _, r in rollouts)
    assert {r.policy_version for _, r in rollouts} == {0, 1}
    e = _run("eval-policy", "--task", "multi_answer", "--db", str(db), "--k", "1,4,16", "--n", "16", "--split", "test", cwd=tmp_path)
    assert e.returncode == 0, e.stderr
    for key in ("pass@16", "D_16", "answer_entropy", "support_retained", "prompts_lost", "v0 (base)"):
        assert key in e.stdout
    es = _run("train", "--task", "multi_answer", "--objective", "es", "--objective-arg", "population=2",
              "--objective-arg", "sigma=0.01", "--steps", "1", "--db", str(db), "--cache-dir", str(cache),
              *TINY, cwd=tmp_path)
    assert es.returncode == 0, es.stderr
    assert len(store.list_runs()) == 2
    from qdevolve.rl.tiny import tiny_policy_dir

    tiny = tiny_policy_dir("multi_answer", cache, seed=0, sft_steps=10)  # the base the runs above built
    m = _run("eval-policy", "--task", "multi_answer", "--model", str(tiny), "--k", "1,4", "--n", "4", cwd=tmp_path)
    assert m.returncode == 0, m.stderr
    assert "pass@4" in m.stdout and str(tiny.name) in m.stdout


@pytest.mark.slow
def test_bad_arguments_exit_2_with_one_line(tmp_path: Path) -> None:
    db = tmp_path / "x.sqlite"
    r = _run("train", "--task", "nope", "--objective", "grpo", "--steps", "1", "--db", str(db), cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.strip().startswith("error: unknown task 'nope'")
    r = _run("train", "--task", "multi_answer", "--objective", "grpo", "--trainer-arg", "nope=1", "--steps", "1",
             "--db", str(db), cwd=tmp_path)
    assert r.returncode == 2 and "unknown key(s) nope" in r.stderr
    r = _run("eval-policy", "--task", "multi_answer", "--db", str(tmp_path / "missing.sqlite"), cwd=tmp_path)
    assert r.returncode == 2
    r = _run("train", "--task", "multi_answer", "--objective", "grpo", "--steps", "1", "--db", str(db),
             "--model", "org/some-hub-model", cwd=tmp_path)
    assert r.returncode == 2 and "never downloads from a model hub" in r.stderr and "smollm2-135m-instruct" in r.stderr
    r = _run("eval-policy", "--task", "multi_answer", cwd=tmp_path)
    assert r.returncode == 2 and "needs --db" in r.stderr and "--model NAME|DIR" in r.stderr
