"""Mutation ``rewrite``: the model answers with the whole program in a fenced block.

Only the EVOLVE-BLOCK regions of the reply are taken; they are spliced into the parent's
fixed skeleton (so a rewrite cannot change code outside the regions). The reply must keep
the parent's number of regions; a reply that dropped the marker lines of a one-region parent
but repeats the skeleton around the region unchanged is accepted too. A parent without markers is evolvable as a whole and the
reply's code replaces it. When a reply has several fenced blocks, the longest one in the
program's language (or untagged) is used.

Salvage, as a careful reader would: a reply that answers with SEARCH/REPLACE blocks instead
of a program is applied as a diff (``metadata["salvaged"] = "diff"``); a whole program that
lost its markers gives the region's definitions (``"region_defs"``:
:func:`region_defs_from_reply`); a fenced block
without markers that redefines what the parent's one region defines is taken as the
region's new body (``"block"``) by the ``diff`` operator (see
:func:`block_from_reply`).
"""

from __future__ import annotations

import ast
import textwrap
from typing import Any

from qdevolve import registry
from qdevolve.mutation._llm import LLMMutation, ParseError, extract_code_blocks
from qdevolve.mutation.blocks import END, START, find_blocks, splice_blocks
from qdevolve.types import Program

__all__ = ["RewriteMutation", "code_from_reply", "splice_into", "block_from_reply", "as_diff", "region_defs_from_reply"]

_ALIASES = {"python": {"python", "py", "python3", ""}}


def code_from_reply(reply: str, language: str) -> str:
    """The program in a reply: its longest fenced block in ``language`` (or untagged).

    Raises:
        ParseError: the reply has no fenced code block.
    """
    blocks = extract_code_blocks(reply)
    if not blocks:
        if START in reply and END in reply:
            return reply
        raise ParseError("no fenced code block in reply")
    ok = _ALIASES.get(language, {language, ""})
    chosen = [code for lang, code in blocks if lang in ok] or [code for _, code in blocks]
    return max(chosen, key=len)


def _body_between_skeleton(parent_code: str, new_code: str) -> str | None:
    """The region body of a marker-less reply that repeats the parent's skeleton around it.

    The reply must start with the parent's lines before ``EVOLVE-BLOCK-START`` and end with
    its lines after ``EVOLVE-BLOCK-END`` (compared without trailing whitespace, leading and
    trailing blank lines ignored); what lies between is the new body. ``None`` otherwise.
    """
    plines = parent_code.split("\n")
    s_idx = next(i for i, ln in enumerate(plines) if START in ln)
    e_idx = next(i for i, ln in enumerate(plines) if END in ln)

    def trim(lines: list[str]) -> list[str]:
        lines = [ln.rstrip() for ln in lines]
        while lines and not lines[0]:
            lines.pop(0)
        while lines and not lines[-1]:
            lines.pop()
        return lines

    prefix, suffix = trim(plines[:s_idx]), trim(plines[e_idx + 1:])
    raw = new_code.split("\n")
    lines = [ln.rstrip() for ln in raw]
    lo = 0
    while lo < len(lines) and not lines[lo]:
        lo += 1
    hi = len(lines)
    while hi > lo and not lines[hi - 1]:
        hi -= 1
    if lines[lo:lo + len(prefix)] != prefix or (suffix and lines[hi - len(suffix):hi] != suffix):
        return None
    middle = raw[lo + len(prefix):hi - len(suffix)]
    while middle and not middle[0].strip():
        middle.pop(0)
    while middle and not middle[-1].strip():
        middle.pop()
    return "\n".join(middle) + "\n" if middle else None


def _top_names(code: str) -> set[str] | None:
    """Names the top-level statements of ``code`` define (``None`` when it does not parse)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return None
    names = set()
    for st in tree.body:
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(st.name)
        elif isinstance(st, (ast.Assign, ast.AnnAssign)):
            targets = st.targets if isinstance(st, ast.Assign) else [st.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def _regions_and_code(reply: str, parent: Program) -> tuple[list[Any], str] | None:
    """A marked Python parent's regions and the reply's code (``None`` when either cannot be read)."""
    if parent.language != "python" or START not in parent.code:
        return None
    try:
        return find_blocks(parent.code), code_from_reply(reply, parent.language)
    except (ValueError, ParseError):
        return None


def block_from_reply(reply: str, parent: Program) -> str | None:
    """The parent with its one region's body replaced by the reply's fenced block, or ``None``.

    Taken only when the parent has exactly one EVOLVE-BLOCK region, the reply's code has no
    markers, parses, and defines every top-level name the parent's region defines (so it is
    the region rewritten, not a fragment). The body is re-indented to the region's.
    """
    read = _regions_and_code(reply, parent)
    if read is None:
        return None
    blocks, new = read
    if len(blocks) != 1 or START in new or END in new:
        return None
    body = parent.code[blocks[0].start:blocks[0].end]
    wanted = _top_names(textwrap.dedent(body))
    new = textwrap.dedent(new).strip("\n") + "\n"
    got = _top_names(new)
    if not wanted or got is None or not wanted <= got:
        return None
    indent = next((ln[: len(ln) - len(ln.lstrip())] for ln in body.split("\n") if ln.strip()), "")
    if indent:
        new = textwrap.indent(new, indent)
    return splice_blocks(parent.code, [new])


def splice_into(parent_code: str, new_code: str) -> str:
    """The parent's skeleton with the regions of ``new_code`` spliced in.

    Raises:
        ParseError: markers missing, unbalanced, or a different number of regions.
    """
    try:
        pblocks = find_blocks(parent_code)
    except ValueError as exc:
        raise ParseError(f"the parent's EVOLVE-BLOCK markers are broken: {exc}") from None
    parent_marked = START in parent_code
    if not parent_marked:
        return new_code if new_code.endswith("\n") or not parent_code.endswith("\n") else new_code + "\n"
    if START not in new_code:
        body = _body_between_skeleton(parent_code, new_code) if len(pblocks) == 1 else None
        if body is None:
            raise ParseError(
                f"the reply has no EVOLVE-BLOCK markers; the parent has {len(pblocks)} region(s) "
                "and only code between the markers is used"
            )
        return splice_blocks(parent_code, [body])
    try:
        nblocks = find_blocks(new_code)
    except ValueError as exc:
        raise ParseError(f"the reply's EVOLVE-BLOCK markers are broken: {exc}") from None
    if len(nblocks) != len(pblocks):
        raise ParseError(f"the reply has {len(nblocks)} EVOLVE-BLOCK region(s), the parent {len(pblocks)}")
    return splice_blocks(parent_code, [new_code[b.start:b.end] for b in nblocks])


@registry.mutation("rewrite")
class RewriteMutation(LLMMutation):
    """A full program reply whose EVOLVE-BLOCK regions replace the parent's."""

    name = "rewrite"
    edit_format = "rewrite"

    def parse(self, reply: str, parent: Program, others: list[Program]) -> tuple[str, dict[str, Any]]:
        try:
            child = splice_into(parent.code, code_from_reply(reply, parent.language))
        except ParseError:
            salvaged = as_diff(reply, parent) or region_defs_from_reply(reply, parent)
            if salvaged is None:
                raise
            return salvaged
        if child == parent.code:
            raise ParseError("the rewrite changes nothing inside the EVOLVE-BLOCK regions")
        return child, {}


def region_defs_from_reply(reply: str, parent: Program) -> tuple[str, dict[str, Any]] | None:
    """The region's functions and classes read out of a whole-program reply that lost its markers.

    Small models rewrite the program but drop the EVOLVE-BLOCK marker lines or change the fixed
    code around the region. For a Python parent with one top-level region, the reply's top-level
    definitions of the names the region defines (and new ones the fixed code does not define:
    helpers the model added) are taken, in the reply's order, as the region's new body
    (``metadata["salvaged"] = "region_defs"``); the fixed code stays the parent's. ``None``
    when the reply does not parse, misses one of the region's definitions, or changes nothing.
    """
    read = _regions_and_code(reply, parent)
    if read is None:
        return None
    blocks, new = read
    body = parent.code[blocks[0].start:blocks[0].end] if len(blocks) == 1 else ""
    if not body.strip() or body[:1].isspace():
        return None
    new = "\n".join(ln for ln in new.split("\n") if START not in ln and END not in ln)
    try:
        region, fixed = ast.parse(body), ast.parse(parent.code[:blocks[0].start] + parent.code[blocks[0].end:])
        tree = ast.parse(textwrap.dedent(new))
    except (SyntaxError, ValueError):
        return None
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    wanted = {st.name for st in region.body if isinstance(st, kinds)}
    fixed_names = {st.name for st in fixed.body if isinstance(st, kinds)}
    taken = [st for st in tree.body if isinstance(st, kinds) and (st.name in wanted or st.name not in fixed_names)]
    if not wanted or not wanted <= {st.name for st in taken}:
        return None
    lines = textwrap.dedent(new).split("\n")
    parts = ["\n".join(lines[min([st.lineno] + [d.lineno for d in st.decorator_list]) - 1:st.end_lineno]).rstrip()
             for st in taken]
    child = splice_blocks(parent.code, ["\n\n\n".join(parts) + "\n"])
    if child == parent.code:
        return None
    return child, {"salvaged": "region_defs"}


def as_diff(reply: str, parent: Program) -> tuple[str, dict[str, Any]] | None:
    """A rewrite reply made of SEARCH/REPLACE blocks, applied as a diff (``None`` if it is not one)."""
    from qdevolve.mutation.diff import DiffMutation

    if "SEARCH" not in reply:
        return None
    try:
        child, meta = DiffMutation().parse(reply, parent, [])
    except ParseError:
        return None
    return child, {**meta, "salvaged": "diff"}
