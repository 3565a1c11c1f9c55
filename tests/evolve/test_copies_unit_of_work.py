"""A plan's copies are a unit of work: their rollouts are stored in one transaction with the run
state the plan left (rng, bandit, usage, counters).

A run with a :class:`~qdevolve.evolve.core.hooks.DuplicateRewarding` listener whose model
sometimes answers with the parent unchanged is SIGKILLed inside the copies' transaction
(after its rollout rows) and after its commit, then resumed: it ends as the uninterrupted run
does (same children, same rollouts with the same rewards and originals, none written twice,
same rng, bandit and counters, same archive). Writing the copies' rollouts without the run
state fails it: resume makes the plan again and stores its copy's rollout a second time.
"""

from __future__ import annotations

import hashlib
import json
import signal
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from qdevolve.testing.scripted_server import ScriptedServer
from qdevolve.testing.scripts import program_after, prompt_of

from ._kill import run_script
from .test_tell_unit_of_work import ITERATIONS, SEED, _example, _outcome
from .test_tell_unit_of_work import reply as edit_reply

TARGET = 2  # the plan with copies around which the kills land


def reply(req: dict[str, Any]) -> str:
    """Half the rewrites of a program other than the seed return the seed (a copy of a stored
    program); a pure function of the request."""
    text = prompt_of(req)
    key = hashlib.sha256(f"{req.get('model')}\n{req.get('seed')}\n{text}".encode()).hexdigest()
    parent = program_after(text, r"current\s+program")
    if "<<<<<<< SEARCH" not in text and parent is not None and parent.strip() != SEED.strip() \
            and int(key[:8], 16) % 2 == 0:
        return f"Back to the start.\n\n```python\n{SEED.rstrip()}\n```\n"
    return edit_reply(req)


SCRIPT = r'''
from qdevolve.evolve.core.engine import Evolution
from qdevolve.evolve.training import Reward, score_reward

db, example, mode, target = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
st["plans"] = 0


class CopyListener:
    """Rewards copies (-1, cluster "copy") and counts rewards; trains nothing."""
    backend, group_size, max_pending, stop_reason = None, None, None, None

    def __init__(self):
        self.counted = 0

    def reward(self, program, result, events, parent):
        return score_reward(program, result, events, parent)

    def duplicate_reward(self, program, original, result):
        return Reward(-1.0, None, "copy")

    def count_reward(self, program, reward):
        self.counted += 1

    async def after_job(self, programs):
        return None

    def close(self):
        return None


orig_dups, orig_ask = Evolution.tell_duplicates, Evolution.ask


def tell_duplicates(self, plan):
    if plan.duplicates and mode == "start":
        st["plans"] += 1
        st["window"] = st["plans"] == target  # until the engine's next plan
    return orig_dups(self, plan)


def ask(self, *a, **kw):
    end_window()
    return orig_ask(self, *a, **kw)


Evolution.tell_duplicates, Evolution.ask = tell_duplicates, ask
store = LineageStore(db)
if mode == "start":
    from qdevolve.evolve.setup.example import load_example
    ex = load_example(example)
    evo = Evolution.start(ex, ex.config, store, progress=False, listener=CopyListener())
else:
    evo = Evolution.resume(store, store.latest_run_id(), progress=False, listener=CopyListener(),
                           example_dir=example)
evo.run()
evo.close()
'''


def _run(tmp_path: Path, db: Path, ex: Path, mode: str, point: str) -> subprocess.CompletedProcess[str]:
    return run_script(tmp_path / "copies.py", SCRIPT, [str(db), str(ex), mode, str(TARGET)], point)


def _rollouts(db: Path) -> list[tuple[Any, ...]]:
    """Rollouts in order: program (by evaluation position), reward, cluster, the original copied."""
    con = sqlite3.connect(db)
    try:
        pos = {pid: i for i, (pid,) in enumerate(con.execute(
            "SELECT p.id FROM programs p JOIN evaluations e ON e.program_id = p.id ORDER BY e.id"))}
        return [(pos[pid], None if reward is None else round(reward, 12), key,
                 pos.get(json.loads(meta or "{}").get("duplicate_of")))
                for pid, reward, key, meta in con.execute(
                    "SELECT program_id, reward, cluster_key, metadata FROM rollouts ORDER BY seq")]
    finally:
        con.close()


@pytest.mark.slow
def test_kill_around_the_copies_write_resumes_to_the_uninterrupted_run(tmp_path: Path) -> None:
    with ScriptedServer(reply) as server:
        ex = _example(tmp_path / "ex", server.url)
        whole_db = tmp_path / "whole.sqlite"
        r = _run(tmp_path, whole_db, ex, "start", "none")
        assert r.returncode == 0, r.stderr[-3000:]
        whole, whole_rollouts = _outcome(whole_db), _rollouts(whole_db)
        copies = [ro for ro in whole_rollouts if ro[3] is not None]
        assert len(copies) >= TARGET and all(ro[1:3] == (-1.0, "copy") for ro in copies), whole_rollouts
        probe = _run(tmp_path, tmp_path / "probe.sqlite", ex, "start", "count")
        assert probe.returncode == -signal.SIGKILL, (probe.stdout, probe.stderr[-3000:])
        counts = probe.stdout.split()
        commits, inserts = int(counts[1]), int(counts[3])
        assert commits >= 1 and inserts >= 1, probe.stdout  # the copies' rollout rows
        points = [f"in:{k}" for k in range(1, inserts + 1)] + [f"after:{k}" for k in range(1, commits + 1)]
        for point in points:
            db = tmp_path / f"cut-{point.replace(':', '-')}.sqlite"
            r = _run(tmp_path, db, ex, "start", point)
            assert r.returncode == -signal.SIGKILL, (point, r.stderr[-3000:])
            r = _run(tmp_path, db, ex, "resume", "none")
            assert r.returncode == 0, (point, r.stderr[-3000:])
            cut = _outcome(db)
            assert len(cut["children"]) == ITERATIONS + 1, point
            assert cut["children"] == whole["children"], point
            assert _rollouts(db) == whole_rollouts, f"killed at {point}: rollouts differ (a copy written twice?)"
            for key in ("rng", "ensemble", "counters"):
                assert cut["state"][key] == whole["state"][key], (point, key)
            assert cut["archive"] == whole["archive"], point
            assert cut["stats"] == whole["stats"], point
