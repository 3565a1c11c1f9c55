"""The ``policy`` mutation operator conditions on its parent.

Unit tests render prompts from real programs; the joined test runs the real engine with a
real tiny policy (pre-trained briefly on expr_edit pairs), the transformers backend and the
local sandbox, and checks that every stored rollout's prompt shows the parent of the
program it produced, across at least three policy versions.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml

from qdevolve.mutation.base import MutationContext
from qdevolve.mutation.policy import PolicyMutation
from qdevolve.types import EvalResult, Program

from .conftest import QDEVOLVE

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "expr_evolution"
TEMPLATE = "0>1,1>4,2>7,3>10,5>16|{parent}|{tests}:"
BLOCK = 'EXPR = "{completion}"\n'


def _program(expr: str) -> Program:
    return Program(code=f'"""doc"""\n\n# EVOLVE-BLOCK-START\nEXPR = "{expr}"\n# EVOLVE-BLOCK-END\n')


def test_prompt_carries_parent_expression_and_pass_bits() -> None:
    op = PolicyMutation(prompt_template=TEMPLATE, block_template=BLOCK)
    ctx = MutationContext(rng=np.random.default_rng(0),
                          parent_result=EvalResult(score=0.4, tests=[1.0, 0.0, 1.0, 0.0, 0.0]))
    assert op.render_prompt(_program("2*x+1"), ctx) == "0>1,1>4,2>7,3>10,5>16|2*x+1|10100:"
    assert op.render_prompt(_program("x*x"), ctx) == "0>1,1>4,2>7,3>10,5>16|x*x|10100:"
    no_tests = MutationContext(rng=np.random.default_rng(0), parent_result=EvalResult(score=0.0))
    assert op.render_prompt(_program("x"), no_tests).endswith("|x|:")
    # the other placeholders still work
    full = PolicyMutation(prompt_template="{parent_block}#{score}", block_template=BLOCK)
    assert full.render_prompt(_program("x"), ctx) == 'EXPR = "x"\n#0.4'


def test_block_template_must_hold_the_completion() -> None:
    with pytest.raises(ValueError, match="completion"):
        PolicyMutation(block_template="EXPR = 1\n")


class _EchoBackend:
    """A backend that records the prompt and answers a fixed completion per sample."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    async def generate(self, requests):  # noqa: ANN001, ANN201
        from qdevolve.backends.base import Completion

        self.prompts += [r.prompt for r in requests]
        return [[Completion(text=f"x+{i % 3 + 1}\n", token_ids=[1], logprobs=[0.0]) for i in range(r.n)]
                for r in requests]


def test_every_candidate_stores_the_prompt_of_its_parent() -> None:
    op = PolicyMutation(prompt_template=TEMPLATE, block_template=BLOCK)
    backend = _EchoBackend()
    parent = _program("3*x")
    ctx = MutationContext(rng=np.random.default_rng(0), n=4,
                          parent_result=EvalResult(score=0.2, tests=[1.0, 0.0, 0.0, 0.0, 0.0]))
    cands = asyncio.run(op.propose(parent, ctx, backend))
    assert backend.prompts == ["0>1,1>4,2>7,3>10,5>16|3*x|10000:"]
    assert len(cands) == 4 and len({c.group_id for c in cands}) == 1
    assert all(c.prompt == backend.prompts[0] and c.parent_ids == (parent.id,) for c in cands)
    assert [re.search(r'EXPR = "(.*)"', c.code).group(1) for c in cands] == ["x+1", "x+2", "x+3", "x+1"]


def test_joined_rollouts_show_the_parent_in_every_prompt(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="the joined loop needs the 'rl' extra (torch, transformers)")
    from qdevolve.db import open_store
    from qdevolve.rl.tiny import tiny_policy_dir

    # A small edit policy, pre-trained briefly (seconds) in the test's own cache.
    policy = tiny_policy_dir("expr_edit", tmp_path / "cache", sft_steps=40, batch_size=32, n_embd=32,
                             n_positions=64)
    config = yaml.safe_load((EXAMPLE / "config.yaml").read_text())
    config["train"].update(policy=str(policy), every=16, objective={"type": "grpo"})
    config["run"]["workers"] = 1
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    db = tmp_path / "joined.sqlite"
    r = subprocess.run([*QDEVOLVE, "run", str(EXAMPLE), "--config", str(tmp_path / "config.yaml"), "--db", str(db),
                        "--iterations", "64", "--sandbox", "local", "--no-progress"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]

    store = open_store(db)
    run_id = store.latest_run_id()
    rollouts = [ro for _seq, ro in store.rollouts(run_id)]
    assert len(rollouts) >= 64
    versions, parents = set(), set()
    for ro in rollouts:
        child = store.get_program(ro.program_id)
        parent = store.get_program(child.parent_ids[0])
        parent_expr = re.search(r'EXPR = "(.*)"', parent.code).group(1)
        bits = "".join("1" if t >= 0.5 else "0" for t in store.get_evaluation(parent.id).tests)
        assert ro.prompt == f"0>1,1>4,2>7,3>10,5>16|{parent_expr}|{bits}:", (ro.prompt, parent_expr, bits)
        versions.add(ro.policy_version)
        parents.add(parent_expr)
    store.close()
    assert len(versions) >= 3, f"rollouts from policy versions {sorted(versions)}"
    assert len(parents) >= 2, "parent selection changes the prompt"
