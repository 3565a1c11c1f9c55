"""The text outside the EVOLVE-BLOCK stays the parent's: the fixed-code check rejects a child
that changes a docstring or a fixed constant there, and docs/plugins.md's operator keeps to
its blocks (the six ``scale_constants`` children once stored ``ok`` had rewritten both)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import numpy as np

from qdevolve import registry
from qdevolve.evolve.core.hooks import fixed_code_checked
from qdevolve.mutation.base import MutationContext
from qdevolve.mutation.blocks import block_texts, edits_inside_blocks
from qdevolve.mutation.fixed_code import fixed_code_violation, skeleton_change
from qdevolve.types import Program

DOCS = Path(__file__).resolve().parents[2] / "docs" / "plugins.md"

PARENT = '''"""Online bin packing: place an item of size 0.25 in the bin with the best priority."""

# EVOLVE-BLOCK-START
def priority(item, remaining, fresh):
    return -(remaining - item) + 0.5 * fresh
# EVOLVE-BLOCK-END


def fill_ratio(fill):
    rem = 1.0 - fill
    return rem
'''

OLD_DOCS_OPERATOR = lambda code, f: re.sub(r"\d+\.\d+", lambda m: repr(float(m.group()) * f), code)  # noqa: E731


def test_whole_file_regex_child_is_rejected() -> None:
    child = OLD_DOCS_OPERATOR(PARENT, 1.5)
    reason = fixed_code_violation(PARENT, child)
    assert reason is not None and "outside the EVOLVE-BLOCK" in reason and "line 1" in reason
    only_fixed_constant = PARENT.replace("rem = 1.0 - fill", "rem = 1.5 - fill")
    assert "line 10" in fixed_code_violation(PARENT, only_fixed_constant)
    comment = PARENT.replace("def fill_ratio", "# tuned\ndef fill_ratio")
    assert fixed_code_violation(PARENT, comment) is not None
    inside = PARENT.replace("0.5 * fresh", "0.75 * fresh")
    assert fixed_code_violation(PARENT, inside) is None


def test_markers_added_or_removed_are_rejected() -> None:
    extra = PARENT + "# EVOLVE-BLOCK-START\nX = 1\n# EVOLVE-BLOCK-END\n"
    assert "region" in skeleton_change(PARENT, extra)
    assert skeleton_change(PARENT, PARENT.replace("# EVOLVE-BLOCK-END\n", "")) is not None
    assert skeleton_change("x = 1\n", "x = 2\n") is None  # no markers: evolvable as a whole


def test_engine_hook_rejects_a_plugin_child_that_changes_the_skeleton() -> None:
    from qdevolve.mutation.base import Candidate

    parent = Program(code=PARENT)
    cand = Candidate(code=OLD_DOCS_OPERATOR(PARENT, 2.0), operator="scale_constants", parent_ids=(parent.id,))
    checked = fixed_code_checked(parent, cand, object())  # a plugin operator
    assert checked.code is None and checked.error.startswith("rejected: the child changes the code outside")


def _docs_operator_source() -> str:
    blocks = re.findall(r"```python\n(.*?)```", DOCS.read_text(encoding="utf-8"), flags=re.S)
    return next(b for b in blocks if '@registry.mutation("scale_constants")' in b)


def test_docs_scale_constants_keeps_to_the_block() -> None:
    with registry.snapshot():
        exec(compile(_docs_operator_source(), str(DOCS), "exec"), {})
        op = registry.mutation.create({"type": "scale_constants"})
        parent = Program(code=PARENT)
        for seed in range(6):
            ctx = MutationContext(rng=np.random.default_rng(seed))
            (cand,) = asyncio.run(op.propose(parent, ctx, None))
            assert cand.code != PARENT
            assert edits_inside_blocks(PARENT, cand.code)
            assert fixed_code_violation(PARENT, cand.code) is None
            assert fixed_code_checked(parent, cand, op).code == cand.code
            assert block_texts(cand.code) != block_texts(PARENT)


def test_docs_block_helper_example_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOCS.read_text(encoding="utf-8"), flags=re.S)
    example = next(b for b in blocks if "assert edits_inside_blocks" in b)
    exec(compile(example, str(DOCS), "exec"), {})
