"""DiffMutation: SEARCH/REPLACE parsing and application, against the real scripted server."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from qdevolve import registry
from qdevolve.backends.openai_backend import OpenAIBackend
from qdevolve.mutation._llm import ParseError
from qdevolve.mutation.base import MutationContext
from qdevolve.mutation.blocks import edits_inside_blocks
from qdevolve.mutation.diff import DiffMutation, apply_diff, parse_diff
from qdevolve.prompts import build_prompt, prompt_hash
from qdevolve.testing import GARBAGE_MODES, GarbageScript, ScriptedModel, ScriptedServer
from qdevolve.testing.programs import CIRCLE_PACKING, score_circle_packing
from qdevolve.types import EvalResult, Program

CODE = """import math

# EVOLVE-BLOCK-START
def f(x):
    y = x + 1
    return y * 2
# EVOLVE-BLOCK-END

def g():
    y = x + 1
    return f(3)
"""


def block(search: str, replace: str) -> str:
    return f"<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE"


def propose(op, parent, backend, n=1, **ctx):
    async def go():
        try:
            return await op.propose(parent, MutationContext(rng=np.random.default_rng(0), n=n, **ctx), backend)
        finally:
            await backend.aclose()

    return asyncio.run(go())


# -- parsing and applying --------------------------------------------------------------
def test_parse_diff_reads_several_blocks_and_tolerates_marker_lengths():
    reply = "idea\n" + block("a", "b") + "\n\n<<<<<<<<< SEARCH\nc\nd\n=========\n\n>>>>>>>>> REPLACE\n"
    assert parse_diff(reply) == [("a", "b"), ("c\nd", "")]


@pytest.mark.parametrize(
    ("reply", "reason"),
    [("no diff here", "no SEARCH/REPLACE block"), ("<<<<<<< SEARCH\nx\n=======\ny\n", "malformed diff")],
)
def test_parse_diff_failures_have_reasons(reply, reason):
    with pytest.raises(ParseError, match=reason):
        parse_diff(reply)


def test_exact_match_prefers_the_occurrence_inside_the_block():
    child, hows = apply_diff(CODE, [("    y = x + 1", "    y = x + 2")])
    assert hows == ["exact"]
    assert "def f(x):\n    y = x + 2" in child and "def g():\n    y = x + 1" in child
    assert edits_inside_blocks(CODE, child)


def test_trailing_whitespace_and_indentation_tolerant_matching():
    child, hows = apply_diff(CODE, [("    return y * 2   ", "    return y * 3")])
    assert hows == ["trailing_whitespace"] and "return y * 3" in child
    # the model dropped the indentation: the replacement is re-indented to the parent's
    child, hows = apply_diff(CODE, [("y = x + 1\nreturn y * 2", "z = x - 1\nif z:\n    z += 1\nreturn z")])
    assert hows == ["indentation"]
    assert "def f(x):\n    z = x - 1\n    if z:\n        z += 1\n    return z\n" in child
    compile(child, "child", "exec")


def test_blocks_apply_in_sequence_and_unmatched_search_names_the_block():
    child, _ = apply_diff(CODE, [("    y = x + 1", "    y = x + 5"), ("    y = x + 5", "    y = x + 6")])
    assert "    y = x + 6\n    return y * 2" in child
    with pytest.raises(ParseError, match=r"block 2 of 2: SEARCH section not found .*'nope'"):
        apply_diff(CODE, [("    y = x + 1", "    y = 0"), ("nope", "x")])
    with pytest.raises(ParseError, match="SEARCH section is empty"):
        apply_diff(CODE, [("", "x = 1")])


def test_parse_rejects_edits_outside_markers_no_ops_and_syntax_errors():
    op = DiffMutation()
    parent = Program(code=CODE)
    with pytest.raises(ParseError, match="outside the EVOLVE-BLOCK"):
        op.parse(block("import math", "import os"), parent, [])
    with pytest.raises(ParseError, match="changes nothing"):
        op.parse(block("    return y * 2", "    return y * 2"), parent, [])
    code, meta = op.parse(block("    return y * 2", "    return y * 4"), parent, [])
    assert meta == {"edits": 1, "match": ["exact"]} and "y * 4" in code


# -- through the real HTTP server ---------------------------------------------------------
def test_scripted_model_diffs_give_valid_children_with_prompt_and_usage():
    parent = Program(code=CIRCLE_PACKING)
    result = EvalResult(score=score_circle_packing(CIRCLE_PACKING), metrics={"sum_radii": 1.66})
    with ScriptedServer(ScriptedModel(seed=3)) as server:
        backend = OpenAIBackend(api_base=server.url, model="scripted")
        cands = propose(DiffMutation(), parent, backend, n=4, parent_result=result)
    assert len(cands) == 4 and len(server.requests) == 1 and server.requests[0]["n"] == 4
    messages = server.requests[0]["messages"]
    assert messages == build_prompt(parent, result, [], edit_format="diff", settings={})
    for c in cands:
        assert c.error is None and c.code != parent.code and c.operator == "diff"
        assert c.parent_ids == (parent.id,)
        assert edits_inside_blocks(parent.code, c.code)
        assert score_circle_packing(c.code) > 0
        assert c.prompt_hash == prompt_hash(messages) and "Current program" in c.prompt
        assert c.completion.completion_tokens > 0 and c.completion.prompt_tokens > 0
        assert c.raw == c.completion.text and "<<<<<<< SEARCH" in c.raw
    assert len({c.group_id for c in cands}) == 1 and cands[0].group_id


@pytest.mark.parametrize("mode", GARBAGE_MODES)
def test_every_garbage_mode_is_a_failed_candidate_with_a_reason(mode):
    parent = Program(code=CIRCLE_PACKING)
    with ScriptedServer(GarbageScript(mode, timeout_delay_s=2.0)) as server:
        backend = OpenAIBackend(api_base=server.url, model="scripted", timeout_s=0.5, retries=1, retry_base_s=0.01)
        cands = propose(DiffMutation(), parent, backend, n=1)
    assert len(cands) == 1
    c = cands[0]
    assert c.code is None and c.error and c.operator == "diff" and c.parent_ids == (parent.id,)
    expected = {
        "no_code": "no SEARCH/REPLACE block",
        "malformed_diff": "malformed diff",
        "outside_markers": "outside the EVOLVE-BLOCK",
        "empty": "empty reply",
        "huge": "reply too long",
        "invalid_utf8": "SyntaxError",
        "syntax_error": "SyntaxError",
        "http_500": "HTTP 500",
        "timeout": "timed out",
    }[mode]
    assert expected in c.error
    assert c.prompt_hash and c.completion is not None


def test_children_over_max_code_length_fail():
    parent = Program(code=CIRCLE_PACKING)
    with ScriptedServer(ScriptedModel()) as server:
        backend = OpenAIBackend(api_base=server.url, model="scripted")
        (c,) = propose(DiffMutation(), parent, backend, settings={"max_code_length": 200})
    assert c.code is None and "over max_code_length=200" in c.error and c.error.startswith("child is ")


def test_backend_that_raises_gives_failed_candidates():
    class Broken:
        async def generate(self, requests):
            raise RuntimeError("engine died")

    cands = asyncio.run(DiffMutation().propose(Program(code=CODE), MutationContext(rng=np.random.default_rng(0), n=2), Broken()))
    assert [c.error for c in cands] == ["backend error: RuntimeError: engine died"] * 2


def test_operator_settings_and_sampling_reach_the_request():
    parent = Program(code=CIRCLE_PACKING)
    with registry.snapshot(), ScriptedServer(ScriptedModel()) as server:
        op = registry.mutation.create({"type": "diff", "temperature": 0.9, "max_tokens": 512,
                                       "settings": {"system_message": "Be bold."}})
        backend = OpenAIBackend(api_base=server.url, model="scripted")
        propose(op, parent, backend)
    sent = server.requests[0]
    assert sent["temperature"] == 0.9 and sent["max_tokens"] == 512
    assert sent["messages"][0] == {"role": "system", "content": "Be bold."}
    assert isinstance(sent["seed"], int)
