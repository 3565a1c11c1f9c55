"""``train.solved_by``: targets solved per policy version, in the version metrics and the summary."""

from __future__ import annotations

import io

from rich.console import Console

from qdevolve.evolve.report.display import print_summary
from qdevolve.evolve.report.summary import RunSummary
from qdevolve.evolve.training import JoinedListener, TrainSettings
from qdevolve.evolve.training.listener import Reward
from qdevolve.types import EvalResult, Program


def _listener(**train) -> JoinedListener:
    lis = JoinedListener.__new__(JoinedListener)
    lis.settings = TrainSettings.from_dict({"solved_by": "target", **train})
    lis.solved = set()
    lis._solved_pending = {}
    lis.samples, lis.stop_reason, lis.es = 0, None, None
    return lis


def _told(lis: JoinedListener, result: EvalResult, *, stored: bool = True) -> None:
    """What the engine does for one child: the reward, then (once stored) the count."""
    program = Program(code="x")
    lis._note_solved(program, result)
    if stored:
        lis.count_reward(program, Reward(result.score, None, ""))


def test_correct_programs_count_their_target_once():
    lis = _listener()
    _told(lis, EvalResult(score=1.0, features={"target": 3.0}))
    _told(lis, EvalResult(score=1.0, features={"target": 3.0}))
    _told(lis, EvalResult(score=0.5, features={"target": 4.0}))   # not correct
    _told(lis, EvalResult(status="error", score=1.0, features={"target": 5.0}))
    _told(lis, EvalResult(score=1.0, features={"target": 7.0}))
    _told(lis, EvalResult(score=1.0, features={"target": 9.0}), stored=False)  # its commit failed
    assert lis.solved == {3.0, 7.0}


def test_without_solved_by_nothing_is_counted():
    lis = _listener(solved_by=None)
    _told(lis, EvalResult(score=1.0, features={"target": 3.0}))
    assert lis.solved == set()


def test_summary_prints_targets_solved_per_version():
    s = RunSummary(run_id="r", db="x.sqlite", evaluations=10, budget=10, seed_score=0.0, best_score=1.0,
                   best_program_id="p", by_status={"ok": 10}, elapsed_s=1.0,
                   stats={"targets_solved_per_version": [(0, 2), (1, 5)]})
    buf = io.StringIO()
    print_summary(s, Console(file=buf, width=200))
    assert "targets solved per policy version" in buf.getvalue() and "v0:2 v1:5" in buf.getvalue()


def test_prompt_template_reads_one_artifact_of_the_parent():
    import numpy as np

    from qdevolve.mutation.base import MutationContext
    from qdevolve.mutation.policy import PolicyMutation
    from qdevolve.types import Program

    op = PolicyMutation(prompt_template="{artifact[examples]}|{parent}|{tests}:",
                        block_template='EXPR = "{completion}"\n')
    parent = Program(code='TARGET = "t01"\n# EVOLVE-BLOCK-START\nEXPR = "x+1"\n# EVOLVE-BLOCK-END\n')
    res = EvalResult(score=0.5, tests=[1.0, 0.0], artifacts={"examples": "0>1,2>5", "target": "t01"})
    ctx = MutationContext(rng=np.random.default_rng(0), parent_result=res)
    assert op.render_prompt(parent, ctx) == "0>1,2>5|x+1|10:"
