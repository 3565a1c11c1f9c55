"""EVOLVE-BLOCK markers: the regions of a program that mutations may change.

A program marks evolvable regions with lines containing ``EVOLVE-BLOCK-START`` and
``EVOLVE-BLOCK-END`` (OpenEvolve's convention). A program without markers is evolvable as
a whole. Everything outside the regions is the fixed *skeleton*.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Block", "find_blocks", "block_texts", "splice_blocks", "edits_inside_blocks", "START", "END"]

START = "EVOLVE-BLOCK-START"
END = "EVOLVE-BLOCK-END"
_START_RE = re.compile(rf"^.*{START}.*$", re.MULTILINE)
_END_RE = re.compile(rf"^.*{END}.*$", re.MULTILINE)


@dataclass(frozen=True)
class Block:
    """An evolvable region: ``code[start:end]`` is its body (between the marker lines)."""

    start: int
    end: int


def find_blocks(code: str) -> list[Block]:
    """The evolvable regions of ``code`` (the whole text when there are no markers).

    Raises:
        ValueError: markers are unbalanced or nested.
    """
    starts = [m.end() + 1 for m in _START_RE.finditer(code)]
    ends = [m.start() for m in _END_RE.finditer(code)]
    if not starts and not ends:
        return [Block(0, len(code))]
    if len(starts) != len(ends):
        raise ValueError(f"unbalanced EVOLVE-BLOCK markers: {len(starts)} START, {len(ends)} END")
    blocks = []
    prev_end = -1
    for s, e in zip(starts, ends, strict=True):
        s = min(s, len(code))
        if e < s - 1 or s <= prev_end:
            raise ValueError("EVOLVE-BLOCK markers are nested or out of order")
        blocks.append(Block(s, max(e, s)))
        prev_end = e
    return blocks


def block_texts(code: str) -> list[str]:
    """The body text of each evolvable region."""
    return [code[b.start:b.end] for b in find_blocks(code)]


def splice_blocks(skeleton: str, bodies: list[str]) -> str:
    """``skeleton`` with its regions' bodies replaced by ``bodies`` (same count)."""
    blocks = find_blocks(skeleton)
    if len(bodies) != len(blocks):
        raise ValueError(f"expected {len(blocks)} EVOLVE-BLOCK bodies, got {len(bodies)}")
    out, pos = [], 0
    for b, body in zip(blocks, bodies, strict=True):
        out.append(skeleton[pos:b.start])
        if body and not body.endswith("\n") and b.end < len(skeleton):
            body += "\n"
        out.append(body)
        pos = b.end
    out.append(skeleton[pos:])
    return "".join(out)


def edits_inside_blocks(original: str, edited: str) -> bool:
    """True when ``edited`` differs from ``original`` only inside the evolvable regions."""
    try:
        ob, eb = find_blocks(original), find_blocks(edited)
    except ValueError:
        return False
    if len(ob) != len(eb):
        return False

    def skeleton(code: str, blocks: list[Block]) -> list[str]:
        parts, pos = [], 0
        for b in blocks:
            parts.append(code[pos:b.start])
            pos = b.end
        parts.append(code[pos:])
        return parts

    return skeleton(original, ob) == skeleton(edited, eb)
