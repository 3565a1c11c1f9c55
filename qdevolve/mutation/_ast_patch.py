"""Write an edited syntax tree back as a textual patch of the source it was parsed from.

:func:`patch_source` walks the original tree and the edited tree side by side and emits the
smallest replacements it can: a changed constant, operator or comparison rewrites the
innermost expression that holds it (a trailing comment on its line survives); a deleted,
duplicated or reordered statement removes, copies or moves whole source lines (a copied or
moved statement keeps its own text). Only the replaced spans are written with
:func:`ast.unparse`; every other byte of the source is kept. The caller checks that the patched
text parses back to the edited tree and otherwise falls back to unparsing the whole region.

Positions come from the original tree's ``lineno``/``col_offset``/``end_lineno``/
``end_col_offset`` (columns are UTF-8 byte offsets, as :mod:`ast` reports them).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

__all__ = ["patch_source"]


class _Replace(Exception):
    """The node cannot be patched inside: replace it whole (its parent decides how)."""


@dataclass
class _Text:
    """The region's text (``body``) and how its lines map to the parsed (dedented) ``source``."""

    body_lines: list[str]  # body split on "\n" (no newline kept)
    starts: list[int]  # offset of each body line in body
    removed: list[int]  # characters of margin dedenting removed from each line
    src_lines: list[str]

    def pos(self, lineno: int, col: int) -> int:
        """Body offset of the (1-based line, UTF-8 byte column) of the parsed source."""
        i = lineno - 1
        chars = len(self.src_lines[i].encode("utf-8")[:col].decode("utf-8", errors="strict"))
        return self.starts[i] + self.removed[i] + chars

    def indent(self, lineno: int) -> str:
        line = self.body_lines[lineno - 1]
        return line[: len(line) - len(line.lstrip())]

    def line_start(self, lineno: int) -> int:
        return self.starts[lineno - 1]

    def after_line(self, lineno: int) -> int:
        """Offset just past line ``lineno``'s newline (the body's end on its last line)."""
        i = lineno - 1
        end = self.starts[i] + len(self.body_lines[i])
        return end + 1 if i + 1 < len(self.body_lines) else end


def _same(a: object, b: object) -> bool:
    if isinstance(a, ast.AST) and isinstance(b, ast.AST):
        return ast.dump(a) == ast.dump(b)
    return type(a) is type(b) and repr(a) == repr(b)


def _first_line(stmt: ast.stmt) -> int:
    decorators = getattr(stmt, "decorator_list", None) or []
    return min([stmt.lineno] + [d.lineno for d in decorators])


class _Patcher:
    def __init__(self, text: _Text, parenthesize: bool) -> None:
        self.text = text
        self.parenthesize = parenthesize
        self.patches: list[tuple[int, int, str]] = []

    # -- whole statements on their own lines ----------------------------------------------
    def alone(self, stmt: ast.stmt) -> bool:
        """Whether ``stmt`` fills its lines (only indentation before, a comment at most after)."""
        t = self.text
        first = _first_line(stmt)
        start = t.pos(stmt.lineno, stmt.col_offset) if first == stmt.lineno else t.line_start(first)
        if t.body_lines[first - 1][: start - t.line_start(first)].strip():
            return False
        if stmt.end_lineno is None or stmt.end_col_offset is None:
            return False
        end = t.pos(stmt.end_lineno, stmt.end_col_offset)
        rest = t.body_lines[stmt.end_lineno - 1][end - t.line_start(stmt.end_lineno):].strip()
        return not rest or rest.startswith("#")

    def lines_of(self, stmt: ast.stmt) -> str:
        """``stmt``'s whole lines, newline included."""
        t = self.text
        start, end = t.line_start(_first_line(stmt)), t.after_line(stmt.end_lineno or stmt.lineno)
        return "\n".join(t.body_lines)[start:end]

    def render(self, new: list[ast.stmt], siblings: list[ast.stmt], indent: str) -> str:
        """Whole lines for ``new``: an unchanged sibling's own text, else unparsed and indented."""
        out = []
        for stmt in new:
            twin = next((s for s in siblings if _same(s, stmt) and self.alone(s)), None)
            if twin is not None:
                text = self.lines_of(twin)
                out.append(text if text.endswith("\n") else text + "\n")
            else:
                out.append("".join(indent + ln + "\n" for ln in ast.unparse(stmt).split("\n")))
        return "".join(out)

    def statements(self, a: list[ast.stmt], b: list[ast.stmt]) -> None:
        i = 0
        while i < min(len(a), len(b)) and _same(a[i], b[i]):
            i += 1
        j = 0
        while j < min(len(a), len(b)) - i and _same(a[len(a) - 1 - j], b[len(b) - 1 - j]):
            j += 1
        mid_a, mid_b = a[i:len(a) - j], b[i:len(b) - j]
        if len(mid_a) == len(mid_b) == 1:
            self.child(mid_a[0], mid_b[0])
            return
        t = self.text
        if not mid_a:  # an insertion: after the statement before it, else before the one after it
            if i > 0 and self.alone(a[i - 1]):
                anchor = a[i - 1]
                at = t.after_line(anchor.end_lineno or anchor.lineno)
            elif i < len(a) and self.alone(a[i]):
                anchor = a[i]
                at = t.line_start(_first_line(anchor))
            else:
                raise _Replace
            text = self.render(mid_b, a, t.indent(anchor.lineno))
            if at == len("\n".join(t.body_lines)) and not text.startswith("\n"):
                text = "\n" + text.rstrip("\n")  # the region's last line has no newline of its own
            self.patches.append((at, at, text))
            return
        if not all(self.alone(s) for s in mid_a):
            raise _Replace
        start = t.line_start(_first_line(mid_a[0]))
        end = t.after_line(mid_a[-1].end_lineno or mid_a[-1].lineno)
        self.patches.append((start, end, self.render(mid_b, a, t.indent(mid_a[0].lineno))))

    # -- nodes ------------------------------------------------------------------------------
    def child(self, a: ast.AST, b: ast.AST) -> None:
        """Patch ``a`` into ``b``, or replace ``a``'s span with ``b`` unparsed."""
        before = len(self.patches)
        try:
            self.node(a, b)
        except _Replace:
            del self.patches[before:]
            self.replace(a, b)

    def node(self, a: ast.AST, b: ast.AST) -> None:
        if _same(a, b):
            return
        if type(a) is not type(b):
            raise _Replace
        for name in a._fields:
            x, y = getattr(a, name, None), getattr(b, name, None)
            if isinstance(x, list) and isinstance(y, list):
                self.sequence(x, y)
            elif isinstance(x, ast.AST) and isinstance(y, ast.AST):
                if not _same(x, y):
                    self.child(x, y)
            elif not _same(x, y):
                raise _Replace

    def sequence(self, x: list[object], y: list[object]) -> None:
        if any(isinstance(s, ast.stmt) for s in x + y):
            self.statements(x, y)  # type: ignore[arg-type]
            return
        if len(x) != len(y):
            raise _Replace
        for u, v in zip(x, y, strict=True):
            if _same(u, v):
                continue
            if not (isinstance(u, ast.AST) and isinstance(v, ast.AST)):
                raise _Replace
            self.child(u, v)

    def replace(self, a: ast.AST, b: ast.AST) -> None:
        if getattr(a, "end_col_offset", None) is None or getattr(a, "lineno", None) is None:
            raise _Replace  # no position of its own (an operator): its parent is rewritten
        t = self.text
        if isinstance(a, ast.stmt):
            if getattr(a, "decorator_list", None):
                raise _Replace
            start = t.pos(a.lineno, a.col_offset)
            lines = ast.unparse(b).split("\n")
            if len(lines) > 1:
                indent = t.indent(a.lineno)
                if start != t.line_start(a.lineno) + len(indent):
                    raise _Replace
                lines = lines[:1] + [indent + ln for ln in lines[1:]]
            text = "\n".join(lines)
        else:
            start = t.pos(a.lineno, a.col_offset)  # type: ignore[attr-defined]
            text = ast.unparse(b)
            if "\n" in text:
                raise _Replace
            if self.parenthesize:
                text = f"({text})"
        end = t.pos(a.end_lineno, a.end_col_offset)  # type: ignore[attr-defined]
        self.patches.append((start, end, text))


def _text(body: str, source: str) -> _Text | None:
    if "\r" in body:
        return None
    body_lines, src_lines = body.split("\n"), source.split("\n")
    if len(body_lines) != len(src_lines):
        return None
    starts, removed, offset = [], [], 0
    for lb, ls in zip(body_lines, src_lines, strict=True):
        if not lb.endswith(ls):
            return None
        starts.append(offset)
        removed.append(len(lb) - len(ls))
        offset += len(lb) + 1
    return _Text(body_lines, starts, removed, src_lines)


def patch_source(body: str, source: str, original: ast.Module, edited: ast.Module, *,
                 parenthesize: bool = False) -> str | None:
    """``body`` with the differences between ``original`` and ``edited`` patched in.

    Args:
        body: The region's text as it stands in the program.
        source: ``body`` with its margin removed line by line (what ``original`` was parsed
            from; the same number of lines, each a suffix of ``body``'s line).
        original: The tree of ``source``, unedited (its positions are used).
        edited: The edited tree (its nodes' positions are ignored).
        parenthesize: Wrap each rewritten expression in parentheses (for an edit whose
            unparsed text would bind differently in place).

    Returns:
        The patched body, or ``None`` when the difference cannot be written as local patches
        (the caller unparses the whole region). The result is not checked here: the caller
        parses it back.
    """
    text = _text(body, source)
    if text is None:
        return None
    patcher = _Patcher(text, parenthesize)
    try:
        patcher.node(original, edited)
    except (_Replace, IndexError, UnicodeDecodeError):
        return None
    out, last = body, len(body) + 1
    for start, end, new in sorted(patcher.patches, key=lambda p: (p[0], p[1]), reverse=True):
        if end > last or start > end:
            return None  # overlapping patches: not a local edit
        out = out[:start] + new + out[end:]
        last = start
    return out
