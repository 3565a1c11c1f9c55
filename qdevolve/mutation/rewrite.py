"""Mutation ``rewrite``: the model answers with the whole program in a fenced block.

Only the EVOLVE-BLOCK regions of the reply are taken; they are spliced into the parent's
fixed skeleton (so a rewrite cannot change code outside the regions). The reply must keep
the parent's number of regions; a reply that dropped the marker lines of a one-region parent
but repeats the skeleton around the region unchanged is accepted too. A parent without markers is evolvable as a whole and the
reply's code replaces it. When a reply has several fenced blocks, the longest one in the
program's language (or untagged) is used.
"""

from __future__ import annotations

from typing import Any

from qdevolve import registry
from qdevolve.mutation._llm import LLMMutation, ParseError, extract_code_blocks
from qdevolve.mutation.blocks import END, START, find_blocks, splice_blocks
from qdevolve.types import Program

__all__ = ["RewriteMutation", "code_from_reply", "splice_into"]

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
        child = splice_into(parent.code, code_from_reply(reply, parent.language))
        if child == parent.code:
            raise ParseError("the rewrite changes nothing inside the EVOLVE-BLOCK regions")
        return child, {}
