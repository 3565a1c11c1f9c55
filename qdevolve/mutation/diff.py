"""Mutation ``diff``: the model answers with SEARCH/REPLACE blocks.

::

    <<<<<<< SEARCH
    lines of the parent
    =======
    their replacement
    >>>>>>> REPLACE

Blocks apply in order, each to the result of the previous one. A SEARCH section matches
whole lines, trying three comparisons in turn (the first that finds a match wins): exact;
ignoring trailing whitespace; ignoring indentation (the replacement is then re-indented by
the difference between the parent's indentation and the SEARCH section's). When a section
occurs more than once, the first occurrence inside an EVOLVE-BLOCK region is used. The
child must differ from the parent only inside the regions (enforced, unlike OpenEvolve
#422) and must parse; otherwise the candidate fails with the reason.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from qdevolve import registry
from qdevolve.mutation._llm import LLMMutation, ParseError
from qdevolve.mutation.blocks import edits_inside_blocks, find_blocks
from qdevolve.types import Program

__all__ = ["DiffMutation", "parse_diff", "apply_diff"]

_BLOCK = re.compile(
    r"^[ \t]*<{5,9}[ \t]*SEARCH[^\n]*\n(.*?)^[ \t]*={5,9}[ \t]*\n(.*?)^[ \t]*>{5,9}[ \t]*REPLACE[^\n]*$",
    re.DOTALL | re.MULTILINE,
)
_SEARCH_MARK = re.compile(r"^[ \t]*<{5,9}[ \t]*SEARCH", re.MULTILINE)

_COMPARE: list[tuple[str, Callable[[str], str]]] = [
    ("exact", lambda s: s),
    ("trailing_whitespace", lambda s: s.rstrip()),
    ("indentation", lambda s: s.strip()),
]


def parse_diff(reply: str) -> list[tuple[str, str]]:
    """The ``(search, replace)`` pairs of a reply.

    Raises:
        ParseError: no SEARCH marker, or a SEARCH marker without a complete block.
    """
    marks = len(_SEARCH_MARK.findall(reply))
    if marks == 0:
        raise ParseError("no SEARCH/REPLACE block in reply")
    pairs = []
    for m in _BLOCK.finditer(reply):
        search, replace = m.group(1), m.group(2)
        pairs.append((search[:-1] if search.endswith("\n") else search,
                      replace[:-1] if replace.endswith("\n") else replace))
    if len(pairs) < marks:
        raise ParseError(
            f"malformed diff: {marks} SEARCH marker(s) but {len(pairs)} complete "
            "SEARCH / ======= / REPLACE block(s)"
        )
    return pairs


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _inside_lines(code: str) -> set[int]:
    try:
        blocks = find_blocks(code)
    except ValueError:
        return set()
    out: set[int] = set()
    for b in blocks:
        out.update(range(code.count("\n", 0, b.start), code.count("\n", 0, b.end)))
    return out


def _apply_one(code: str, search: str, replace: str) -> tuple[str, str]:
    """``code`` with ``search`` replaced; returns the new code and the comparison used."""
    if not search.strip():
        raise ParseError("a SEARCH section is empty; copy the lines to replace from the program")
    lines = code.split("\n")
    s_lines = search.split("\n")
    k = len(s_lines)
    inside = _inside_lines(code)
    for how, norm in _COMPARE:
        target = [norm(x) for x in s_lines]
        hits = [i for i in range(len(lines) - k + 1) if [norm(x) for x in lines[i:i + k]] == target]
        if not hits:
            continue
        pick = next((i for i in hits if all(j in inside for j in range(i, i + k))), hits[0])
        r_lines = replace.split("\n") if replace != "" else []
        if how == "indentation":
            s_ind = next((_indent(x) for x in s_lines if x.strip()), "")
            c_ind = next((_indent(x) for x in lines[pick:pick + k] if x.strip()), "")
            if s_ind != c_ind:
                r_lines = [c_ind + x[len(s_ind):] if x.startswith(s_ind) else (c_ind + x.lstrip() if x.strip() else x)
                           for x in r_lines]
        return "\n".join(lines[:pick] + r_lines + lines[pick + k:]), how
    first = search.strip().split("\n")[0][:80]
    raise ParseError(f"SEARCH section not found in the parent (first line: {first!r})")


def apply_diff(code: str, pairs: list[tuple[str, str]]) -> tuple[str, list[str]]:
    """Apply ``pairs`` in order; returns the child and the comparison used by each."""
    hows = []
    for i, (search, replace) in enumerate(pairs):
        try:
            code, how = _apply_one(code, search, replace)
        except ParseError as exc:
            raise ParseError(f"block {i + 1} of {len(pairs)}: {exc}") from None
        hows.append(how)
    return code, hows


@registry.mutation("diff")
class DiffMutation(LLMMutation):
    """SEARCH/REPLACE edits inside the EVOLVE-BLOCK regions (see the module docstring)."""

    name = "diff"
    edit_format = "diff"

    def parse(self, reply: str, parent: Program, others: list[Program]) -> tuple[str, dict[str, Any]]:
        pairs = parse_diff(reply)
        child, hows = apply_diff(parent.code, pairs)
        if child == parent.code:
            raise ParseError("the diff changes nothing")
        if not edits_inside_blocks(parent.code, child):
            raise ParseError("edit outside the EVOLVE-BLOCK markers: only code between "
                             "EVOLVE-BLOCK-START and EVOLVE-BLOCK-END may change")
        return child, {"edits": len(pairs), "match": hows}
