"""BlockMutation: one EVOLVE-BLOCK body asked for, read from messy replies, spliced back."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from qdevolve import registry
from qdevolve.backends.base import Completion
from qdevolve.mutation._llm import ParseError
from qdevolve.mutation.base import MutationContext
from qdevolve.mutation.block import BlockMutation, body_from_reply
from qdevolve.mutation.blocks import block_texts, edits_inside_blocks
from qdevolve.types import Program

CODE = (
    "import math\n\n"
    "# EVOLVE-BLOCK-START\n"
    "def priority(value, weight):\n"
    "    return value - 2.0 * weight\n"
    "# EVOLVE-BLOCK-END\n\n\n"
    "def pack(items):\n"
    "    return sorted(items, key=lambda it: -priority(*it))\n"
)
NEW = "def priority(value, weight):\n    return value / (weight + 1e-9)\n"
INDENTED = (
    "def solve(xs):\n"
    "    total = 0\n"
    "    # EVOLVE-BLOCK-START\n"
    "    for x in xs:\n"
    "        total += x\n"
    "    # EVOLVE-BLOCK-END\n"
    "    return total\n"
)


def parse(reply: str, code: str = CODE, index: int = 0) -> tuple[str, dict]:
    op = BlockMutation()
    op._index = index
    return op.parse(reply, Program(code=code), [])


@pytest.mark.parametrize(
    ("reply", "cleaned"),
    [
        # the asked-for shape: prose, then one fenced block
        (f"Here is a better priority:\n```python\n{NEW}```\nIt divides value by weight.", None),
        # several fences: the longest python one
        (f"Run:\n```bash\npython x.py\n```\nCode:\n```python\n{NEW}```\n", None),
        # no fence, leading and trailing prose
        (f"Sure! The improved code is:\n{NEW}\nThis should score higher.", ["no_fence", "prose"]),
        # the marker lines repeated
        (f"```python\n# EVOLVE-BLOCK-START\n{NEW}# EVOLVE-BLOCK-END\n```", ["markers"]),
        # a lone START marker (the reply was cut before END)
        (f"```python\n# EVOLVE-BLOCK-START\n{NEW}```", ["markers"]),
        # the whole program without markers: the fixed code around it is dropped
        (f"```python\nimport math\n\n{NEW}\n\ndef pack(items):\n    return sorted(items, key=lambda it: -priority(*it))\n```",
         ["repeated_context"]),
        # a partial repeat: just the import at the top
        (f"```python\nimport math\n{NEW}```", ["repeated_context"]),
        # indented by four spaces: dedented
        ("```python\n" + "".join("    " + ln + "\n" for ln in NEW.splitlines()) + "```", ["reindented"]),
        # an unclosed fence running to the end
        (f"```python\n{NEW}", None),
    ],
)
def test_messy_replies_become_the_same_child(reply: str, cleaned: list[str] | None) -> None:
    child, meta = parse(reply)
    assert child == CODE.replace("def priority(value, weight):\n    return value - 2.0 * weight\n", NEW)
    assert edits_inside_blocks(CODE, child)
    assert meta.get("cleaned") == cleaned or (cleaned and set(cleaned) <= set(meta.get("cleaned", [])))


def test_a_bare_function_body_goes_under_the_regions_def_line() -> None:
    code = CODE.replace("def priority(value, weight):\n", 'def priority(value, weight):\n    """Docstring."""\n')
    child, meta = parse("Replace the body with:\n```python\nratio = value / weight\nreturn ratio\n```", code)
    assert block_texts(child) == ['def priority(value, weight):\n    """Docstring."""\n    ratio = value / weight\n'
                                  "    return ratio\n"]
    assert "function_body" in meta["cleaned"]


def test_a_cut_off_tail_and_example_usage_are_dropped() -> None:
    child, meta = parse(f"```python\n{NEW}\n\ndef helper(x):\n    return [x for x in (1, 2\n")
    assert block_texts(child) == [NEW] and "cut_off" in meta["cleaned"]
    child, meta = parse(f"```python\n{NEW}\n# Example usage:\nprint(priority(3, 4))\nbest = max(1, 2)\n```")
    assert block_texts(child) == [NEW] and "example_usage" in meta["cleaned"]


def test_a_dropped_parameter_gets_the_parents_signature_back() -> None:
    child, meta = parse("```python\ndef priority(value):\n    return value * 2\n```")
    assert block_texts(child) == ["def priority(value, weight):\n    return value * 2\n"]
    assert "signature" in meta["cleaned"]
    # a different parameter is not a dropped one: left alone
    child, meta = parse("```python\ndef priority(value, size):\n    return value / size\n```")
    assert "def priority(value, size):" in child and "signature" not in meta.get("cleaned", [])


def test_a_renamed_function_takes_the_regions_name() -> None:
    """SmolLM2 often renames the function it rewrites (``max_priority``, ``improve_priority``):
    the one new public function takes the region's name, and an alias keeps its own calls."""
    child, meta = parse("```python\ndef improve_priority(value):\n    return value * 3\n```")
    assert block_texts(child) == ["def priority(value, weight):\n    return value * 3\n"]
    assert meta["cleaned"] == ["renamed", "signature"]
    child, meta = parse("```python\ndef best(value, weight):\n    return best(value, 0) if weight else value\n```")
    assert block_texts(child) == ["def priority(value, weight):\n    return best(value, 0) if weight else value\n"
                                  "best = priority\n"]
    # two new functions: which one is meant is not known, so the child is refused as before
    with pytest.raises(ParseError, match="does not define priority"):
        parse("```python\ndef a(value, weight):\n    return 1\n\ndef b(value, weight):\n    return 2\n```")
    # the region's function is still there: a new helper is a helper, not a rename
    child, meta = parse(f"```python\ndef helper(x):\n    return x\n\n{NEW}```")
    assert "renamed" not in meta.get("cleaned", []) and "def helper(x):" in child


def test_a_helper_only_the_region_calls_may_go_and_an_entry_point_may_not() -> None:
    """Helpers a model once added must not become requirements for every later reply."""
    region = ("def scale(w):\n    return w + 1e-9\n\n\n"
              "def priority(value, weight):\n    return value / scale(weight)\n")
    code = CODE.replace("def priority(value, weight):\n    return value - 2.0 * weight\n", region)
    child, _ = parse(f"```python\n{NEW}```", code)
    assert block_texts(child) == [NEW], "scale is priority's helper: the reply may drop it"
    with pytest.raises(ParseError, match="does not define priority"):
        parse("```python\ndef scale(w):\n    return w\n```", code)
    # a helper the fixed code calls is required
    fixed_calls = code.replace("-priority(*it)", "-priority(*it) * scale(1)")
    assert fixed_calls != code
    with pytest.raises(ParseError, match="does not define scale"):
        parse(f"```python\n{NEW}```", fixed_calls)


def test_windows_line_endings() -> None:
    child, _ = parse("```python\r\n" + NEW.replace("\n", "\r\n") + "```\r\n")
    assert "\r" not in child and NEW in child


def test_indented_region_gets_the_parents_indentation_back() -> None:
    reply = "```python\nfor x in xs:\n    total += x * x\n```"
    child, meta = parse(reply, INDENTED)
    assert block_texts(child) == ["    for x in xs:\n        total += x * x\n"]
    assert "reindented" in meta["cleaned"]
    # the enclosing def and the code after the region repeated around the body
    reply = "```python\ndef solve(xs):\n    total = 0\n    for x in xs:\n        total -= x\n    return total\n```"
    child, _ = parse(reply, INDENTED)
    assert block_texts(child) == ["    for x in xs:\n        total -= x\n"]


def test_second_region_of_two() -> None:
    code = "# EVOLVE-BLOCK-START\na = 1\n# EVOLVE-BLOCK-END\nprint(a)\n# EVOLVE-BLOCK-START\nb = 2\n# EVOLVE-BLOCK-END\n"
    child, meta = parse("```python\nb = 3\n```", code, index=1)
    assert block_texts(child) == ["a = 1\n", "b = 3\n"] and meta["block"] == 1
    # a reply repeating both regions: the asked one is taken
    reply = "```python\n# EVOLVE-BLOCK-START\na = 1\n# EVOLVE-BLOCK-END\n# EVOLVE-BLOCK-START\nb = 4\n# EVOLVE-BLOCK-END\n```"
    child, _ = parse(reply, code, index=1)
    assert block_texts(child) == ["a = 1\n", "b = 4\n"]


def test_search_replace_reply_is_applied_as_a_diff() -> None:
    reply = "<<<<<<< SEARCH\n    return value - 2.0 * weight\n=======\n    return value / weight\n>>>>>>> REPLACE\n"
    child, meta = parse(reply)
    assert "return value / weight" in child and meta["salvaged"] == "diff"


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("I would divide the value by the weight.", "no fenced code block"),
        ("```python\n```", "no code for the block"),
        ("```python\n# EVOLVE-BLOCK-START\n# EVOLVE-BLOCK-END\n```", "no code for the block"),
        ("```python\ndef priority(value, weight):\n    return value - 2.0 * weight\n```", "same as the parent's"),
        ("```python\nclass Score:\n    pass\n```", "does not define priority"),
    ],
)
def test_replies_without_a_usable_body_fail_with_the_reason(reply: str, reason: str) -> None:
    with pytest.raises(ParseError, match=reason):
        parse(reply)


def test_body_from_reply_refuses_broken_parent_markers() -> None:
    with pytest.raises(ParseError, match="markers are broken"):
        body_from_reply("```python\nx = 1\n```", "# EVOLVE-BLOCK-START\nx = 0\n")


class _Replies:
    """A backend that answers every request with the next reply (a real object, no network)."""

    def __init__(self, replies: list[str]) -> None:
        self.replies, self.requests = list(replies), []

    async def generate(self, requests):
        self.requests += requests
        return [[Completion(text=self.replies.pop(0), model="test", finish_reason="stop")] for _ in requests]


def test_propose_shows_the_block_and_keeps_the_fixed_code() -> None:
    backend = _Replies([f"```python\n{NEW}```", "```python\ndef priority(:\n```"])
    op = registry.mutation.create({"type": "block"})
    ctx = MutationContext(rng=np.random.default_rng(0))
    good = asyncio.run(op.propose(Program(code=CODE), ctx, backend))[0]
    assert good.code is not None and edits_inside_blocks(CODE, good.code) and good.operator == "block"
    prompt = backend.requests[0].messages[-1]["content"]
    assert "The block of a Python program" in prompt and "def pack" not in prompt, "the block alone, not the fixed code"
    assert "```python\ndef priority(value, weight):\n    return value - 2.0 * weight\n```" in prompt
    bad = asyncio.run(op.propose(Program(code=CODE), ctx, backend))[0]
    assert bad.code is None and "SyntaxError" in bad.error and bad.raw
