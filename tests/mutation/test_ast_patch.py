"""The ``ast`` operator writes an edit back as a patch: every byte outside the edited lines is kept.

Checked on the agents example's seed agent (whose whole source is one EVOLVE-BLOCK, so a whole-
region rewrite would reformat all of it) and through the ``self`` operator end to end."""

from __future__ import annotations

import ast
import asyncio
import re
from pathlib import Path

import numpy as np
import pytest

from qdevolve.mutation.ast_mutator import ASTMutation
from qdevolve.mutation.base import MutationContext
from qdevolve.types import EvalResult, Program

ROOT = Path(__file__).resolve().parents[2]
AGENT = (ROOT / "examples" / "agents" / "initial_program.py").read_text()
INDENTED = '''class Solver:
    # EVOLVE-BLOCK-START
    # tuned by hand:   keep this comment
    def step(self, x):
        """Advance.

        Keeps this text.
        """
        scale = 0.5   # half
        offset = (1 +
                  2)  # a continued line
        if x > 3 and x != 4:  # guard
            return x * scale + offset
        return  x
    # EVOLVE-BLOCK-END
'''


def _statements(tree: ast.AST) -> list[ast.stmt]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.stmt)]


def _allowed(code: str, edit: str) -> tuple[int, int]:
    """The 0-based line range ``[a, b)`` an edit may touch: the innermost statement holding the
    line the edit names (and, for a reorder, the statement after it)."""
    line = int(re.search(r"\(line (\d+)\)", edit).group(1))
    tree = ast.parse(code)
    holding = [s for s in _statements(tree) if s.lineno <= line <= (s.end_lineno or s.lineno)]
    stmt = min(holding, key=lambda s: (s.end_lineno or s.lineno) - s.lineno)
    if edit.startswith(("delete", "duplicate", "reorder")):
        stmt = next(s for s in holding if s.lineno == line)
    end = stmt.end_lineno or stmt.lineno
    if edit.startswith("reorder"):
        sibling = next(s for s in _statements(tree) if s.lineno > end and s.col_offset == stmt.col_offset)
        end = sibling.end_lineno or sibling.lineno
    return stmt.lineno - 1, end


def _kept_outside(parent: str, child: str, span: tuple[int, int]) -> bool:
    p, c = parent.split("\n"), child.split("\n")
    a, b = span
    tail = len(p) - b
    return c[:a] == p[:a] and c[len(c) - tail:] == p[b:] and len(c) - tail >= a


@pytest.mark.slow
@pytest.mark.parametrize("code", [AGENT, INDENTED], ids=["agent", "indented"])
def test_every_edit_keeps_every_byte_outside_the_edited_statement(code: str) -> None:
    op = ASTMutation(max_edits=1)
    kinds = set()
    for seed in range(150):
        child, edits, error = op.mutate_code(code, np.random.default_rng(seed))
        assert child is not None, error
        (edit,) = edits
        kinds.add(edit.split()[0])
        assert _kept_outside(code, child, _allowed(code, edit)), (edit, child)
        if edit.startswith(("constant", "operator", "compare")):  # one expression: only its own line(s)
            line = int(re.search(r"\(line (\d+)\)", edit).group(1))
            multi = "(1 +" in code.split("\n")[line - 1]  # INDENTED's one expression over two lines
            assert _kept_outside(code, child, (line - 1, line + multi)), (edit, child)
    assert kinds == {"constant", "operator", "compare", "delete", "duplicate", "reorder"}


def test_a_constant_edit_keeps_its_trailing_comment_and_the_rest_of_the_file() -> None:
    op = ASTMutation(max_edits=1, weights={"operator": 0, "compare": 0, "delete": 0, "duplicate": 0, "reorder": 0})
    for seed in range(8):
        child, edits, _ = op.mutate_code(AGENT, np.random.default_rng(seed))
        changed = [(x, y) for x, y in zip(AGENT.split("\n"), child.split("\n"), strict=True) if x != y]
        assert len(changed) == 1, edits
        old, new = changed[0]
        assert re.sub(r"-?\d+(\.\d+)?(e-?\d+)?", "N", old) == re.sub(r"-?\d+(\.\d+)?(e-?\d+)?", "N", new), (old, new)


@pytest.mark.slow
def test_several_edits_still_leave_untouched_lines_alone() -> None:
    op = ASTMutation(max_edits=3)
    for seed in range(40):
        child, _edits, error = op.mutate_code(AGENT, np.random.default_rng(seed))
        assert child is not None, error
        assert child.startswith(AGENT.split("# EVOLVE-BLOCK-START")[0])  # the module docstring, byte for byte
        kept = set(child.split("\n"))
        comments = [ln for ln in AGENT.split("\n") if ln.lstrip().startswith("#") or "  # " in ln]
        assert sum(ln not in kept for ln in comments) <= 3  # at most the lines the edits touched


@pytest.mark.slow
def test_self_modification_of_the_seed_agent_keeps_its_formatting(tmp_path: Path) -> None:
    """The ``self`` operator: the seed agent run on its own source (sandboxed) returns a child
    that differs from it only inside the statements its one ``tools.mutate`` edit touched."""
    import difflib

    from qdevolve import registry

    op = registry.mutation.create({"type": "self", "calls": 1, "evaluations": 0, "wall_s": 30})
    op.use_sandbox("local")
    parent = Program(code=AGENT, run_id="r")
    context = MutationContext(rng=np.random.default_rng(0), n=3, parent_result=EvalResult(score=0.1),
                              settings={"example_dir": str(ROOT / "examples" / "agents")})
    try:
        children = asyncio.run(op.propose(parent, context, None))
    finally:
        op.close()
    assert len(children) == 3
    for cand in children:
        assert cand.code is not None and cand.code != AGENT, cand.error
        hunks = [o for o in difflib.SequenceMatcher(a=AGENT.split("\n"), b=cand.code.split("\n"),
                                                    autojunk=False).get_opcodes() if o[0] != "equal"]
        # one edit: one hunk (a reorder may show as a move: two), a few lines at most
        assert 1 <= len(hunks) <= 2 and sum(max(i2 - i1, j2 - j1) for _, i1, i2, j1, j2 in hunks) <= 12, hunks
        assert "# candidates made per call" in cand.code or "TRIES" not in cand.code
