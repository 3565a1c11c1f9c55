"""RewriteMutation: whole-program replies, only EVOLVE-BLOCK regions are taken."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from qdevolve.backends.openai_backend import OpenAIBackend
from qdevolve.mutation._llm import ParseError, check_syntax
from qdevolve.mutation.base import MutationContext
from qdevolve.mutation.blocks import block_texts, edits_inside_blocks
from qdevolve.mutation.rewrite import RewriteMutation, code_from_reply
from qdevolve.testing import GARBAGE_MODES, GarbageScript, ScriptedModel, ScriptedServer
from qdevolve.testing.programs import CIRCLE_PACKING, score_circle_packing
from qdevolve.types import Program

CODE = "import math\n\n# EVOLVE-BLOCK-START\ndef f():\n    return 1\n# EVOLVE-BLOCK-END\n\nprint(f())\n"


def fenced(code: str, lang: str = "python") -> str:
    return f"Here you go:\n```{lang}\n{code}```\nDone."


def test_only_block_regions_are_taken_and_the_skeleton_is_kept():
    reply = fenced("import os  # the model changed the skeleton\n\n# EVOLVE-BLOCK-START\ndef f():\n    return 2\n# EVOLVE-BLOCK-END\n\nprint('hacked')\n")
    child, meta = RewriteMutation().parse(reply, Program(code=CODE), [])
    assert child == CODE.replace("return 1", "return 2")
    assert edits_inside_blocks(CODE, child) and meta == {}


def test_longest_python_block_is_used():
    reply = "Tip:\n```bash\npip install numpy\n```\n" + fenced("# EVOLVE-BLOCK-START\ndef f():\n    return 3\n# EVOLVE-BLOCK-END\n")
    child, _ = RewriteMutation().parse(reply, Program(code=CODE), [])
    assert block_texts(child) == ["def f():\n    return 3\n"]


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("I would use a hexagonal grid.", "no fenced code block"),
        (fenced("def g():\n    return 2\n"), "has no EVOLVE-BLOCK markers"),
        (fenced("# EVOLVE-BLOCK-START\na = 1\n# EVOLVE-BLOCK-END\n# EVOLVE-BLOCK-START\nb = 1\n# EVOLVE-BLOCK-END\n"), "2 EVOLVE-BLOCK region"),
        (fenced("# EVOLVE-BLOCK-START\ndef f():\n    return 1\n# EVOLVE-BLOCK-END\n"), "changes nothing"),
        (fenced("# EVOLVE-BLOCK-START\ndef f(:\n    return 2\n# EVOLVE-BLOCK-END\n"), "SyntaxError"),
    ],
)
def test_bad_rewrites_fail_with_reason(reply, reason):
    op = RewriteMutation()
    with pytest.raises(ParseError, match=reason):
        code, _ = op.parse(reply, Program(code=CODE), [])
        check_syntax(code, "python")


def test_reply_without_markers_but_with_the_skeleton_is_accepted():
    reply = fenced("import math\n\ndef f():\n    return 5\n\nprint(f())\n")
    child, _ = RewriteMutation().parse(reply, Program(code=CODE), [])
    assert child == CODE.replace("return 1", "return 5")
    # a changed skeleton: the region's definitions are read out of it, the fixed code stays
    changed_skeleton = fenced("import os\n\ndef f():\n    return 5\n\nprint('hacked', f())\n")
    child, meta = RewriteMutation().parse(changed_skeleton, Program(code=CODE), [])
    assert child == CODE.replace("return 1", "return 5") and meta == {"salvaged": "region_defs"}


def test_region_definitions_are_read_out_of_a_program_without_markers():
    """SmolLM2 answered 36 of 48 rewrite prompts with a program without markers (BENCHMARKS.md)."""
    reply = fenced("import math\n\ndef helper(x):\n    return x * 2\n\n\ndef f():\n    return helper(3)\n\n"
                   "def pack():\n    return 'the fixed code, changed'\n")
    parent = Program(code=CODE.replace("print(f())", "def pack():\n    return f()"))
    child, meta = RewriteMutation().parse(reply, parent, [])
    assert block_texts(child) == ["def helper(x):\n    return x * 2\n\n\ndef f():\n    return helper(3)\n"]
    assert "the fixed code, changed" not in child and meta["salvaged"] == "region_defs"
    with pytest.raises(ParseError, match="has no EVOLVE-BLOCK markers"):  # f is missing: not the region
        RewriteMutation().parse(fenced("def g():\n    return 1\n"), parent, [])


def test_parent_without_markers_is_replaced_whole():
    child, _ = RewriteMutation().parse(fenced("x = 2\n"), Program(code="x = 1\n"), [])
    assert child == "x = 2\n"


def test_unclosed_fence_runs_to_the_end():
    assert code_from_reply("```python\nx = 1\n", "python") == "x = 1\n"


def run(op, parent, server, n, **kw):
    backend = OpenAIBackend(api_base=server.url, model="scripted", **kw)

    async def go():
        try:
            return await op.propose(parent, MutationContext(rng=np.random.default_rng(1), n=n), backend)
        finally:
            await backend.aclose()

    return asyncio.run(go())


def test_rewrites_from_the_scripted_server():
    parent = Program(code=CIRCLE_PACKING)
    with ScriptedServer(ScriptedModel(seed=2)) as server:
        cands = run(RewriteMutation(), parent, server, n=3)
    assert "Rewrite the program" in server.requests[0]["messages"][1]["content"]
    for c in cands:
        assert c.error is None and c.operator == "rewrite" and c.parent_ids == (parent.id,)
        assert edits_inside_blocks(CIRCLE_PACKING, c.code) and score_circle_packing(c.code) > 0


@pytest.mark.parametrize("mode", [m for m in GARBAGE_MODES if m not in ("timeout",)])
def test_garbage_gives_failed_rewrites(mode):
    with ScriptedServer(GarbageScript(mode)) as server:
        (c,) = run(RewriteMutation(), Program(code=CIRCLE_PACKING), server, n=1, retries=0)
    assert c.code is None and c.error and c.operator == "rewrite"


def test_a_parser_that_raises_fails_that_reply_only_and_keeps_the_prompt():
    """A bug in one reply's parse is that child's failure (prompt hash and reply kept), not the
    operator's: the group's other replies still become children."""
    from qdevolve.backends.base import Completion

    good = fenced("# EVOLVE-BLOCK-START\ndef f():\n    return 2\n# EVOLVE-BLOCK-END\n")

    class Flaky(RewriteMutation):
        def parse(self, reply, parent, others):
            if "boom" in reply:
                raise RuntimeError("parser bug")
            return super().parse(reply, parent, others)

    class TwoReplies:
        async def generate(self, requests):
            return [[Completion(text="boom", completion_tokens=1), Completion(text=good, completion_tokens=9)]]

    ctx = MutationContext(rng=np.random.default_rng(0), parent_result=None, n=2)
    bad, ok = asyncio.run(Flaky().propose(Program(code=CODE), ctx, TwoReplies()))
    assert bad.code is None and "parsing the reply raised RuntimeError: parser bug" in bad.error
    assert bad.prompt_hash and bad.prompt_hash == ok.prompt_hash and bad.raw == "boom"
    assert ok.code == CODE.replace("return 1", "return 2")
