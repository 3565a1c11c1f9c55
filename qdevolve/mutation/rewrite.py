"""Mutation ``rewrite``: the model answers with the whole program in a fenced block.

Only the EVOLVE-BLOCK regions of the reply are taken; they are spliced into the parent's
fixed skeleton (so a rewrite cannot change code outside the regions). The reply must keep
the parent's number of regions. A parent without markers is evolvable as a whole and the
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
        raise ParseError(
            f"the reply has no EVOLVE-BLOCK markers; the parent has {len(pblocks)} region(s) "
            "and only code between the markers is used"
        )
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
