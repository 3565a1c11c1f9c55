"""CrossoverMutation: two parents, one child, both parent ids."""

from __future__ import annotations

import asyncio

import numpy as np

from qdevolve.backends.openai_backend import OpenAIBackend
from qdevolve.mutation.base import MutationContext
from qdevolve.mutation.blocks import edits_inside_blocks
from qdevolve.mutation.crossover import CrossoverMutation
from qdevolve.testing import ScriptedModel, ScriptedServer
from qdevolve.testing.programs import CIRCLE_PACKING, CIRCLE_PACKING_VARIANT, score_circle_packing
from qdevolve.types import EvalResult, Program

A, B = Program(code=CIRCLE_PACKING), Program(code=CIRCLE_PACKING_VARIANT)
B_RESULT = EvalResult(score=1.5)


def propose(server, n=2, others=((B, B_RESULT),)):
    backend = OpenAIBackend(api_base=server.url, model="scripted")
    ctx = MutationContext(rng=np.random.default_rng(0), n=n, parent_result=EvalResult(score=1.6), other_parents=list(others))

    async def go():
        try:
            return await CrossoverMutation().propose(A, ctx, backend)
        finally:
            await backend.aclose()

    return asyncio.run(go())


def test_crossover_children_have_both_parents_and_keep_the_first_skeleton():
    with ScriptedServer(ScriptedModel(seed=4)) as server:
        cands = propose(server, n=3)
    prompt = server.requests[0]["messages"][1]["content"]
    assert "0.27 * math.cos" in prompt and "0.25 * math.cos" in prompt and "Second parent" in prompt
    assert CrossoverMutation.n_parents == 2
    for c in cands:
        assert c.error is None and c.operator == "crossover"
        assert c.parent_ids == (A.id, B.id) and c.metadata["second_parent"] == B.id
        assert edits_inside_blocks(CIRCLE_PACKING, c.code) and score_circle_packing(c.code) > 0


def test_missing_second_parent_is_a_failed_candidate_without_a_request():
    with ScriptedServer(ScriptedModel()) as server:
        cands = propose(server, n=2, others=())
    assert len(cands) == 2 and not server.requests
    assert all(c.code is None and "needs 2 parents" in c.error and c.parent_ids == (A.id,) for c in cands)


def test_reply_without_code_fails_with_both_parent_ids():
    with ScriptedServer(lambda r: "Both parents are great.") as server:
        (c,) = propose(server, n=1)
    assert c.code is None and c.error == "no fenced code block in reply" and c.parent_ids == (A.id, B.id)
