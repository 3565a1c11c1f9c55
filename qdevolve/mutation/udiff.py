"""Salvage of a unified diff (``@@`` hunks) given where SEARCH/REPLACE blocks were asked.

Models trained on patches often answer a SEARCH/REPLACE request with ``git diff`` output.
A careful reader turns each hunk into one SEARCH/REPLACE pair: SEARCH is the hunk's context
and ``-`` lines, REPLACE its context and ``+`` lines, both in order; line numbers in the
``@@`` header are ignored (models get them wrong), so the pair is then matched like any
SEARCH section (exact, then up to whitespace and indentation; :mod:`qdevolve.mutation.diff`).
A blank line inside a hunk is read as a blank context line (models drop its leading space).
"""

from __future__ import annotations

import re

__all__ = ["unified_pairs"]

_HUNK = re.compile(r"^@@[^@\n]*@@")
_HEADER = re.compile(r"^(---|\+\+\+) ")


def _pair(lines: list[str]) -> tuple[str, str] | None:
    while lines and not lines[-1].strip():  # blank lines after the hunk are not part of it
        lines.pop()
    search, replace, changed = [], [], False
    for ln in lines:
        tag, text = (ln[:1], ln[1:]) if ln else (" ", "")
        if tag in (" ", "-"):
            search.append(text)
        if tag in (" ", "+"):
            replace.append(text)
        changed = changed or tag in ("-", "+")
    if not changed or not any(s.strip() for s in search):
        return None
    return "\n".join(search), "\n".join(replace)


def unified_pairs(reply: str) -> list[tuple[str, str]]:
    """The ``(search, replace)`` pairs of the unified-diff hunks in ``reply`` (none: ``[]``)."""
    pairs: list[tuple[str, str]] = []
    hunk: list[str] | None = None
    for ln in reply.split("\n"):
        if _HUNK.match(ln):
            if hunk is not None and (p := _pair(hunk)) is not None:
                pairs.append(p)
            hunk = []
            continue
        if hunk is None:
            continue
        if ln.startswith("\\") or _HEADER.match(ln):  # "\ No newline at end of file", next file's header
            continue
        if ln.startswith(("```", "~~~")) or (ln and ln[0] not in " -+"):
            if (p := _pair(hunk)) is not None:
                pairs.append(p)
            hunk = None
            continue
        hunk.append(ln)
    if hunk is not None and (p := _pair(hunk)) is not None:
        pairs.append(p)
    return pairs
