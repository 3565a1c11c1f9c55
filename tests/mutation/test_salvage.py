"""Salvage: replies a careful reader would still apply become children, recorded as such."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from qdevolve.backends.openai_backend import OpenAIBackend
from qdevolve.errors import RunAborted
from qdevolve.mutation._llm import ParseError
from qdevolve.mutation.base import MutationContext
from qdevolve.mutation.blocks import block_texts, edits_inside_blocks
from qdevolve.mutation.diff import DiffMutation
from qdevolve.mutation.rewrite import RewriteMutation
from qdevolve.testing import ScriptedServer
from qdevolve.testing.programs import CIRCLE_PACKING
from qdevolve.types import Program

CODE = """import math

# EVOLVE-BLOCK-START
def f(x):
    y = x + 1

    return y * 2
# EVOLVE-BLOCK-END

def g():
    return f(3)
"""
PARENT = Program(code=CODE)


def diff(search: str, replace: str) -> str:
    return f"<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n"


def fenced(code: str) -> str:
    return f"Here is my answer.\n```python\n{code}```\n"


@pytest.mark.parametrize(
    ("search", "how"),
    [
        ("    y = x + 1", None),
        ("    y = x + 1   ", "trailing_whitespace"),
        ("y = x + 1\n\nreturn y * 2", "indentation"),
        ("    y=x+1\n    return  y*2", "whitespace"),  # spacing differs and the blank line is missing
        ("    y = x + 1\n\n\n    return y * 2", "whitespace"),  # an extra blank line
    ],
)
def test_search_sections_match_up_to_whitespace(search: str, how: str | None) -> None:
    child, meta = DiffMutation().parse(diff(search, "    y = x + 7\n    return y * 2"), PARENT, [])
    assert "y = x + 7" in child and "y = x + 1" not in child
    compile(child, "child", "exec")
    assert edits_inside_blocks(CODE, child)
    assert meta.get("salvaged") == how


def test_whitespace_match_reindents_the_replacement() -> None:
    child, meta = DiffMutation().parse(diff("y=x+1", "if x:\n    y = x + 3\nelse:\n    y = 0"), PARENT, [])
    assert "    if x:\n        y = x + 3\n    else:\n        y = 0\n" in child and meta["salvaged"] == "whitespace"
    compile(child, "child", "exec")


def test_a_full_program_where_a_diff_was_asked_is_taken_as_a_rewrite() -> None:
    reply = fenced(CODE.replace("y * 2", "y * 5"))
    child, meta = DiffMutation().parse(reply, PARENT, [])
    assert child == CODE.replace("y * 2", "y * 5") and meta["salvaged"] == "full_program"


def test_a_full_block_where_a_diff_was_asked_replaces_the_region() -> None:
    reply = fenced("def f(x):\n    return x * 9\n")
    child, meta = DiffMutation().parse(reply, PARENT, [])
    assert block_texts(child) == ["def f(x):\n    return x * 9\n"] and meta["salvaged"] == "block"
    assert edits_inside_blocks(CODE, child)


def test_a_fragment_that_does_not_redefine_the_block_is_not_salvaged() -> None:
    with pytest.raises(ParseError, match="no SEARCH/REPLACE block"):
        DiffMutation().parse(fenced("z = 1\n"), PARENT, [])
    with pytest.raises(ParseError, match="no SEARCH/REPLACE block"):
        DiffMutation().parse("Try a smaller step.", PARENT, [])


def test_a_diff_where_a_rewrite_was_asked_is_applied() -> None:
    child, meta = RewriteMutation().parse(diff("    return y * 2", "    return y * 6"), PARENT, [])
    assert "return y * 6" in child and meta["salvaged"] == "diff"


def test_a_diff_where_a_crossover_was_asked_is_applied_to_the_first_parent() -> None:
    from qdevolve.mutation.crossover import CrossoverMutation

    other = Program(code=CODE.replace("y * 2", "y * 3"))
    child, meta = CrossoverMutation().parse(diff("    return y * 2", "    return y * 8"), PARENT, [other])
    assert "return y * 8" in child and meta["salvaged"] == "diff" and meta["second_parent"] == other.id


def test_salvage_kind_reaches_the_candidate_through_the_real_server() -> None:
    parent = Program(code=CIRCLE_PACKING)
    reply = fenced("def construct_packing():\n    return [(0.5, 0.5)] * 26\n")
    ctx = MutationContext(rng=np.random.default_rng(0))

    async def go(b: OpenAIBackend):
        try:
            return await DiffMutation().propose(parent, ctx, b)
        finally:
            await b.aclose()

    with ScriptedServer(lambda r: reply) as server:
        (cand,) = asyncio.run(go(OpenAIBackend(api_base=server.url, model="m")))
    assert cand.code is not None and cand.metadata["salvaged"] == "block"


def test_failed_replies_are_kept_truncated() -> None:
    parent = Program(code=CIRCLE_PACKING)
    ctx = MutationContext(rng=np.random.default_rng(0))
    op = DiffMutation(max_reply_chars=50_000, max_failed_reply_chars=1000)

    async def go(b: OpenAIBackend):
        try:
            return await op.propose(parent, ctx, b)
        finally:
            await b.aclose()

    with ScriptedServer(lambda r: "no code " * 20_000) as server:
        (cand,) = asyncio.run(go(OpenAIBackend(api_base=server.url, model="m")))
    assert cand.code is None and "reply too long" in cand.error
    assert len(cand.raw) == 1000 and len(cand.completion.text) == 1000
    assert cand.metadata["reply_chars"] == 160_000 and cand.metadata["reply_truncated"] is True


def test_run_aborted_passes_through_the_operator() -> None:
    server = ScriptedServer(lambda r: "x")
    url = server.url
    server.stop()
    b = OpenAIBackend(api_base=url, model="m", retries=0, max_connection_failures=1)
    ctx = MutationContext(rng=np.random.default_rng(0))
    with pytest.raises(RunAborted, match="unreachable"):
        asyncio.run(DiffMutation().propose(Program(code=CIRCLE_PACKING), ctx, b))


def test_every_sloppy_scripted_reply_is_salvaged_by_the_diff_operator() -> None:
    """The sloppy script's slips (what the LLM benchmark feeds both frameworks) all become children."""
    from qdevolve.prompts import build_prompt
    from qdevolve.testing import ScriptedModel

    model = ScriptedModel(seed=4, sloppy=1.0)
    parent = Program(code=CIRCLE_PACKING)
    messages = build_prompt(parent, None, [], edit_format="diff", settings={})
    kinds = {}
    for _ in range(40):
        reply = model({"messages": messages, "_choice": 0})
        child, meta = DiffMutation().parse(reply, parent, [])
        compile(child, "child", "exec")
        assert edits_inside_blocks(CIRCLE_PACKING, child)
        kinds[meta["salvaged"]] = kinds.get(meta["salvaged"], 0) + 1
    assert set(kinds) == {"indentation", "whitespace", "block", "full_program"}, kinds


UNIFIED = """I changed the increment:
```diff
--- a/program.py
+++ b/program.py
@@ -4,4 +4,4 @@ def f(x):
 def f(x):
-    y = x + 1
+    y = x + 7

     return y * 2
```
"""


def test_unified_diff_is_read_as_search_replace() -> None:
    child, meta = DiffMutation().parse(UNIFIED, PARENT, [])
    assert "y = x + 7" in child and "y = x + 1" not in child
    assert child.replace("x + 7", "x + 1") == CODE, "nothing else changes"
    assert meta["salvaged"] == "unified_diff" and meta["edits"] == 1


def test_unified_diff_with_wrong_line_numbers_dropped_indentation_and_two_hunks() -> None:
    reply = ("@@ -90,2 +90,2 @@\n"
             "-y = x + 1\n"
             "+y = x + 2\n"
             "@@ -1,1 +1,1 @@\n"
             "-    return y * 2\n"
             "+    return y * 3\n")
    child, meta = DiffMutation().parse(reply, PARENT, [])
    assert "    y = x + 2" in child and "    return y * 3" in child  # re-indented to the parent's
    compile(child, "child", "exec")
    assert meta["salvaged"] == "unified_diff" and meta["edits"] == 2


def test_unified_diff_that_does_not_apply_or_edits_fixed_code_fails_with_reason() -> None:
    with pytest.raises(ParseError, match="not found"):
        DiffMutation().parse("@@ -1 +1 @@\n-    z = 5\n+    z = 6\n", PARENT, [])
    with pytest.raises(ParseError, match="EVOLVE-BLOCK"):
        DiffMutation().parse("@@ -1 +1 @@\n-    return f(3)\n+    return f(4)\n", PARENT, [])
    with pytest.raises(ParseError, match="no SEARCH"):  # only context lines: not a diff
        DiffMutation().parse("@@ -1 +1 @@\n     y = x + 1\n", PARENT, [])


def test_unified_diff_salvage_reaches_the_candidate_through_the_real_server() -> None:
    parent = Program(code=CODE)
    ctx = MutationContext(rng=np.random.default_rng(0))

    async def go(b: OpenAIBackend):
        try:
            return await DiffMutation().propose(parent, ctx, b)
        finally:
            await b.aclose()

    with ScriptedServer(lambda r: UNIFIED) as server:
        (cand,) = asyncio.run(go(OpenAIBackend(api_base=server.url, model="m")))
    assert cand.code == CODE.replace("x + 1", "x + 7")
    assert cand.metadata["salvaged"] == "unified_diff"
