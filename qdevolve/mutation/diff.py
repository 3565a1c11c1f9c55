"""Mutation ``diff``: the model answers with SEARCH/REPLACE blocks.

::

    <<<<<<< SEARCH
    lines of the parent
    =======
    their replacement
    >>>>>>> REPLACE

Blocks apply in order, each to the result of the previous one. A SEARCH section matches
whole lines, trying four comparisons in turn (the first that finds a match wins): exact;
ignoring trailing whitespace; ignoring indentation; ignoring all whitespace and blank lines
(for the last two the replacement is re-indented by the difference between the parent's
indentation and the SEARCH section's). When a section occurs more than once, the first
occurrence inside an EVOLVE-BLOCK region is used. The child must differ from the parent
only inside the regions (enforced, unlike OpenEvolve #422) and must parse; otherwise the
candidate fails with the reason.

Salvage, as a careful reader would: a reply with no SEARCH/REPLACE block but a fenced
program (with the EVOLVE-BLOCK markers, or the parent's fixed code around the new body) is
taken as a rewrite, and a fenced block that redefines what the parent's one region defines
is taken as the region's new body; a unified diff (``@@`` hunks, as ``git diff`` prints) is
read hunk by hunk as SEARCH/REPLACE pairs (:mod:`qdevolve.mutation.udiff`). The child
records how in ``metadata["salvaged"]`` (``full_program``, ``block``, ``unified_diff``, or
the loosest SEARCH comparison used).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from qdevolve import registry
from qdevolve.mutation._llm import LLMMutation, ParseError, check_deadline, extract_code_blocks
from qdevolve.mutation.blocks import edits_inside_blocks, find_blocks
from qdevolve.mutation.udiff import unified_pairs
from qdevolve.types import Program

__all__ = ["DiffMutation", "parse_diff", "apply_diff", "salvage_program", "salvage_unified"]

# One line each, anchored at the line's start and free of nested quantifiers: the parser
# scans the reply once, line by line (time linear in the reply; no backtracking across lines).
_SEARCH_LINE = re.compile(r"[ \t]*<{5,9}[ \t]*SEARCH")
_DIVIDER_LINE = re.compile(r"[ \t]*={5,9}[ \t]*")
_REPLACE_LINE = re.compile(r"[ \t]*>{5,9}[ \t]*REPLACE")

_COMPARE: list[tuple[str, Callable[[str], str]]] = [
    ("exact", lambda s: s),
    ("trailing_whitespace", lambda s: s.rstrip()),
    ("indentation", lambda s: s.strip()),
]
_LOOSENESS = ["exact", "trailing_whitespace", "indentation", "whitespace"]


def _squash(line: str) -> str:
    return "".join(line.split())


def parse_diff(reply: str) -> list[tuple[str, str]]:
    """The ``(search, replace)`` pairs of a reply, in one pass over its lines.

    A block opens at a line starting (after blanks) with 5 to 9 ``<`` and ``SEARCH``, switches
    at the first following line of only 5 to 9 ``=``, and closes at the first following line
    starting with 5 to 9 ``>`` and ``REPLACE``; a marker inside a section is text of that
    section (so a nested SEARCH marker leaves the count of markers above the count of blocks).
    Time and memory are linear in the reply, whatever its markers.

    Raises:
        ParseError: no SEARCH marker, or a SEARCH marker without a complete block.
    """
    marks = 0
    pairs: list[tuple[str, str]] = []
    state, body, divider = "out", 0, 0  # offsets: start of the SEARCH body, of the divider line
    pos, size = 0, len(reply)
    while pos <= size:  # one line per step, matched in place (no per-line string is built)
        nl = reply.find("\n", pos)
        end = size if nl < 0 else nl
        is_search = _SEARCH_LINE.match(reply, pos, end) is not None
        marks += is_search
        if state == "out":
            if is_search and nl >= 0:
                state, body = "search", nl + 1
        elif state == "search":
            if nl >= 0 and _DIVIDER_LINE.fullmatch(reply, pos, end):
                state, divider = "replace", pos
        elif _REPLACE_LINE.match(reply, pos, end):
            after = reply.find("\n", divider) + 1  # the divider line ends with a newline
            pairs.append((reply[body:divider - 1] if divider > body else "",
                          reply[after:pos - 1] if pos > after else ""))
            state = "out"
        if nl < 0:
            break
        pos = nl + 1
    if marks == 0:
        raise ParseError("no SEARCH/REPLACE block in reply")
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


def _reindent(r_lines: list[str], s_lines: list[str], c_lines: list[str]) -> list[str]:
    """The replacement shifted by the parent's indentation minus the SEARCH section's."""
    s_ind = next((_indent(x) for x in s_lines if x.strip()), "")
    c_ind = next((_indent(x) for x in c_lines if x.strip()), "")
    if s_ind == c_ind:
        return r_lines
    return [c_ind + x[len(s_ind):] if x.startswith(s_ind) else (c_ind + x.lstrip() if x.strip() else x)
            for x in r_lines]


def _starts(normed: list[str], target: list[str]) -> list[int]:
    """Indices where ``target`` occurs in ``normed`` (each line normalised once; a slice is
    compared only where the first line already matches)."""
    k = len(target)
    if k == 0:
        return list(range(len(normed) + 1))
    first = target[0]
    return [i for i in range(len(normed) - k + 1) if normed[i] == first and normed[i:i + k] == target]


def _loose_hits(lines: list[str], s_lines: list[str]) -> list[tuple[int, int]]:
    """``(start, end)`` line spans equal to ``s_lines`` ignoring all whitespace and blank lines."""
    target = [_squash(x) for x in s_lines if x.strip()]
    kept = [(i, _squash(x)) for i, x in enumerate(lines) if x.strip()]
    k = len(target)
    return [(kept[j][0], kept[j + k - 1][0] + 1) for j in _starts([t for _, t in kept], target)]


def _matches(lines: list[str], s_lines: list[str]) -> tuple[str, list[tuple[int, int]]]:
    """The first comparison that finds ``s_lines`` in ``lines``, and the spans it finds."""
    k = len(s_lines)
    for how, norm in _COMPARE:
        hits = [(i, i + k) for i in _starts([norm(x) for x in lines], [norm(x) for x in s_lines])]
        if hits:
            return how, hits
    return "whitespace", _loose_hits(lines, s_lines)


def _apply_one(code: str, search: str, replace: str) -> tuple[str, str]:
    """``code`` with ``search`` replaced; returns the new code and the comparison used."""
    if not search.strip():
        raise ParseError("a SEARCH section is empty; copy the lines to replace from the program")
    lines = code.split("\n")
    s_lines = search.split("\n")
    inside = _inside_lines(code)
    r_lines = replace.split("\n") if replace != "" else []
    how, hits = _matches(lines, s_lines)
    if not hits:
        first = search.strip().split("\n")[0][:80]
        raise ParseError(f"SEARCH section not found in the parent (first line: {first!r})")
    lo, hi = next(((a, b) for a, b in hits if all(j in inside for j in range(a, b))), hits[0])
    if how in ("indentation", "whitespace"):
        r_lines = _reindent(r_lines, s_lines, lines[lo:hi])
    return "\n".join(lines[:lo] + r_lines + lines[hi:]), how


def apply_diff(code: str, pairs: list[tuple[str, str]]) -> tuple[str, list[str]]:
    """Apply ``pairs`` in order; returns the child and the comparison used by each.

    Each pair costs a pass over the program, so between pairs the parse deadline
    (:func:`qdevolve.mutation._llm.parse_deadline`) is checked: a reply with more blocks than
    can be applied in time fails with a :class:`ParseError` instead of holding the controller.
    """
    hows = []
    for i, (search, replace) in enumerate(pairs):
        check_deadline(f"applying SEARCH/REPLACE block {i + 1} of {len(pairs)}")
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
        try:
            pairs = parse_diff(reply)
        except ParseError as exc:
            salvaged = salvage_unified(reply, parent) or salvage_program(reply, parent)
            if salvaged is None:
                raise exc from None
            return salvaged
        child, hows = _apply_checked(parent, pairs)
        meta: dict[str, Any] = {"edits": len(pairs), "match": hows}
        loosest = max(hows, key=_LOOSENESS.index)
        if loosest != "exact":
            meta["salvaged"] = loosest
        return child, meta


def _apply_checked(parent: Program, pairs: list[tuple[str, str]]) -> tuple[str, list[str]]:
    """``apply_diff`` on the parent, refused when it changes nothing or edits outside a block."""
    child, hows = apply_diff(parent.code, pairs)
    if child == parent.code:
        raise ParseError("the diff changes nothing")
    if not edits_inside_blocks(parent.code, child):
        raise ParseError("edit outside the EVOLVE-BLOCK markers: only code between "
                         "EVOLVE-BLOCK-START and EVOLVE-BLOCK-END may change")
    return child, hows


def salvage_unified(reply: str, parent: Program) -> tuple[str, dict[str, Any]] | None:
    """A unified diff (``@@`` hunks) read as SEARCH/REPLACE pairs (:mod:`qdevolve.mutation.udiff`).

    Returns ``(child, metadata)``, ``None`` when the reply has no hunk; a hunk that does not
    apply is a :class:`ParseError` with the reason, as for a SEARCH/REPLACE block.
    """
    pairs = unified_pairs(reply)
    if not pairs:
        return None
    child, hows = _apply_checked(parent, pairs)
    return child, {"edits": len(pairs), "match": hows, "salvaged": "unified_diff"}


def salvage_program(reply: str, parent: Program) -> tuple[str, dict[str, Any]] | None:
    """A diff reply with no SEARCH/REPLACE block read as a whole program or a whole block.

    Returns ``(child, metadata)`` or ``None`` when the reply holds neither.
    """
    from qdevolve.mutation.rewrite import block_from_reply, code_from_reply, splice_into

    if not extract_code_blocks(reply):
        return None
    try:
        child = splice_into(parent.code, code_from_reply(reply, parent.language))
        kind = "full_program"
    except ParseError:
        child = block_from_reply(reply, parent)
        kind = "block"
    if child is None or child == parent.code:
        return None
    return child, {"edits": 0, "salvaged": kind}
