"""The ``policy`` mutation operator conditions on its parent.

Unit tests render prompts from real programs. The joined run (real engine, tiny policy, local
sandbox) whose every rollout shows its parent across policy versions is in
``tests/evolve/test_joined_prompts.py``.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import numpy as np
import pytest

from qdevolve.mutation.base import MutationContext
from qdevolve.mutation.policy import PolicyMutation
from qdevolve.types import EvalResult, Program

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
