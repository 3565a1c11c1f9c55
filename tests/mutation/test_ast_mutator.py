"""The offline ``ast`` mutation: always valid, only inside EVOLVE-BLOCKs, seeded."""

from __future__ import annotations

import ast
import asyncio
import re

import numpy as np
import pytest

from qdevolve import registry
from qdevolve.errors import ConfigError
from qdevolve.mutation.ast_mutator import EDIT_KINDS, ASTMutation
from qdevolve.mutation.base import MutationContext
from qdevolve.mutation.blocks import block_texts, edits_inside_blocks
from qdevolve.types import Program

SEED = '''"""Circle packing seed (skeleton text must survive byte for byte)."""
import numpy as np

SIZE = 26  # outside the block: never touched


def construct(n=SIZE):
    """Place circles."""
    # EVOLVE-BLOCK-START
    # a grid start
    centers = []
    k = int(np.ceil(np.sqrt(n)))
    for i in range(n):
        x = (i % k + 0.5) / k
        y = (i // k + 0.5) / k
        if x > 0.5 and y <= 0.25 or i == 3:
            x -= 0.01
        centers.append((x, y))
    radii = [0.5 / k] * n
    note = """multi-line
string kept"""
    # EVOLVE-BLOCK-END
    return np.array(centers), np.array(radii)


# EVOLVE-BLOCK-START
def helper(v):
    total = 0
    while v > 1:
        v = v / 2.0
        total += 1
    return total * 3
# EVOLVE-BLOCK-END


if __name__ == "__main__":
    print(construct())
'''


def _propose(code: str, seed: int, n: int = 4, **kw) -> list:
    op = ASTMutation(**kw)
    parent = Program(code=code, run_id="r")
    return asyncio.run(op.propose(parent, MutationContext(rng=np.random.default_rng(seed), n=n), None))


def _skeleton(code: str) -> str:
    return re.sub(r"EVOLVE-BLOCK-START.*?EVOLVE-BLOCK-END", "", code, flags=re.S)


@pytest.mark.slow
def test_many_seeds_every_child_is_valid_and_inside_the_blocks() -> None:
    seen_edits: set[str] = set()
    for seed in range(60):
        cands = _propose(SEED, seed, n=3)
        assert len(cands) == 3
        codes = [c.code for c in cands]
        assert all(c is not None for c in codes), [c.error for c in cands]
        assert len(set(codes)) == 3 and SEED not in codes
        for c in cands:
            compile(c.code, "<child>", "exec")
            assert edits_inside_blocks(SEED, c.code)
            assert _skeleton(c.code) == _skeleton(SEED)
            assert c.operator == "ast" and len(c.parent_ids) == 1 and 1 <= len(c.metadata["edits"]) <= 3
            # the edited block keeps the function's indentation
            body = block_texts(c.code)[0]
            assert all(ln.startswith("    ") for ln in body.splitlines() if ln.strip() and "string kept" not in ln)
            notes = [n.value.value for n in ast.walk(ast.parse(c.code))
                     if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "note"]
            assert all(v == "multi-line\nstring kept" for v in notes)  # string contents never re-indented
            seen_edits.update(e.split()[0] for e in c.metadata["edits"])
    assert seen_edits == set(EDIT_KINDS)


def test_same_rng_same_children_and_one_draw_per_call() -> None:
    a = [c.code for c in _propose(SEED, 5)]
    b = [c.code for c in _propose(SEED, 5)]
    assert a == b
    assert a != [c.code for c in _propose(SEED, 6)]
    assert a != [c.code for c in _propose(SEED, 5, seed_offset=1)]
    rng, ref = np.random.default_rng(9), np.random.default_rng(9)
    asyncio.run(ASTMutation().propose(Program(code=SEED), MutationContext(rng=rng, n=5), None))
    ref.integers(0, 2**63 - 1)
    assert rng.bit_generator.state == ref.bit_generator.state


def test_constants_keep_their_type() -> None:
    code = "# EVOLVE-BLOCK-START\na = 7\nb = 0.25\n# EVOLVE-BLOCK-END\n"
    only_constants = {k: 0.0 for k in EDIT_KINDS if k != "constant"}
    for seed in range(40):
        (cand,) = _propose(code, seed, n=1, max_edits=1, weights=only_constants)
        tree = ast.parse(cand.code)
        values = {}
        for node in tree.body:
            v = node.value
            values[node.targets[0].id] = -v.operand.value if isinstance(v, ast.UnaryOp) else v.value
        assert isinstance(values["a"], int) and isinstance(values["b"], float)
        assert (values["a"], values["b"]) != (7, 0.25)


def test_program_without_markers_is_evolvable_as_a_whole() -> None:
    code = "def f(x):\n    if x < 3:\n        return x * 2\n    return x - 1\n"
    for seed in range(10):
        (cand,) = _propose(code, seed, n=1)
        assert cand.code is not None and cand.code != code
        compile(cand.code, "<c>", "exec")


def test_unusable_parents_give_failed_candidates_with_reasons() -> None:
    unbalanced = "# EVOLVE-BLOCK-START\nx = 1\n"
    (c,) = _propose(unbalanced, 0, n=1)
    assert c.code is None and "unbalanced" in c.error
    fragment = "if True:\n    # EVOLVE-BLOCK-START\n    x = 1\n  else:\n    # EVOLVE-BLOCK-END\n    pass\n"
    (c,) = _propose(fragment, 0, n=1)
    assert c.code is None and "parses" in c.error
    nothing = "# EVOLVE-BLOCK-START\nimport os\n# EVOLVE-BLOCK-END\n"
    (c,) = _propose(nothing, 0, n=1, weights={"reorder": 0.0})
    assert c.code is None and "no site" in c.error


def test_registered_and_validates_options() -> None:
    op = registry.mutation.create({"type": "ast", "max_edits": 2})
    assert isinstance(op, ASTMutation) and op.n_parents == 1 and op.needs_backend is False
    for bad in ({"max_edits": 0}, {"weights": {"nope": 1.0}}, {"weights": {k: 0 for k in EDIT_KINDS}},
                {"sigma": 0}, {"seed_offset": -1}):
        with pytest.raises(ConfigError):
            ASTMutation(**bad)


def test_indented_block_with_multiline_docstring_round_trips() -> None:
    code = (
        "class Solver:\n"
        "    # EVOLVE-BLOCK-START\n"
        "    def step(self, x):\n"
        '        """Advance.\n'
        "\n"
        "        Keeps this text.\n"
        '        """\n'
        "        return x * 0.5 + 1\n"
        "    # EVOLVE-BLOCK-END\n"
        "\n"
        "    def other(self):\n"
        "        return 2\n"
    )
    doc = ast.get_docstring(ast.parse(code).body[0].body[0], clean=False)
    for seed in range(20):
        (cand,) = _propose(code, seed, n=1)
        assert cand.code is not None, cand.error
        assert edits_inside_blocks(code, cand.code)
        step = ast.parse(cand.code).body[0].body[0]
        assert ast.get_docstring(step, clean=False) == doc
