"""Server-side rendering helpers: highlighted code and diffs, artifact tails.

Pygments escapes every character of the text it highlights (``&``, ``<``, ``>``, quotes), so
its HTML output carries program text as text; it emits class names only (no inline styles,
which the page's Content-Security-Policy would refuse), styled by ``/static/pygments.css``.
"""

from __future__ import annotations

import difflib
import functools
from typing import Any

from markupsafe import escape
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import DiffLexer, TextLexer, get_lexer_by_name
from pygments.util import ClassNotFound

from qdevolve.languages import UnknownLanguage, language_for_path
from qdevolve.programtree import TreeError, file_pairs, is_tree, parse_tree
from qdevolve.textsafe import strip_surrogates

__all__ = ["highlight_code", "highlight_diff", "tail", "pygments_css", "ARTIFACT_TAIL"]

ARTIFACT_TAIL = 4000  # characters of each artifact shown (its end: where tracebacks end)
_FORMATTER = HtmlFormatter(cssclass="hl", linenos="table", wrapcode=True)
_DIFF_FORMATTER = HtmlFormatter(cssclass="hl", wrapcode=True)


def _file_heading(path: str) -> str:
    return f'<h3 class="file-path">{escape(path)}</h3>'


def highlight_code(code: str, language: str | None) -> str:
    """HTML of ``code`` highlighted as ``language`` (plain text when Pygments has no lexer);
    a program tree (:mod:`qdevolve.programtree`) file by file, each under its path and
    highlighted by its own extension's language."""
    if is_tree(code):
        try:
            tree = parse_tree(code)
        except TreeError:
            pass  # a malformed tree is shown as the text it is
        else:
            return "".join(_file_heading(path + ("  (main)" if path == tree.main else ""))
                           + highlight_code(text, _language_of(path))
                           for path, text in tree.files.items())
    try:
        lexer = get_lexer_by_name(language or "python")
    except ClassNotFound:
        lexer = TextLexer()
    return highlight(strip_surrogates(code), lexer, _FORMATTER)


def highlight_diff(old: str, new: str, old_name: str, new_name: str) -> str:
    """HTML of the unified diff ``old`` -> ``new`` (3 lines of context); of two program
    trees, one diff per changed file under its path."""
    pairs = file_pairs(old, new)
    if len(pairs) > 1 or pairs[0][0]:
        parts = [_file_heading(path) + highlight_diff(a, b, f"{old_name}/{path}", f"{new_name}/{path}")
                 for path, a, b in pairs if a != b]
        return "".join(parts) or highlight_diff("", "", old_name, new_name)
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                 fromfile=old_name, tofile=new_name, n=3)
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines) or "(no change)\n"
    return highlight(strip_surrogates(text), DiffLexer(), _DIFF_FORMATTER)


def _language_of(path: str) -> str:
    try:
        return language_for_path(path).name
    except UnknownLanguage:
        return "text"


def tail(text: Any, limit: int = ARTIFACT_TAIL) -> tuple[str, int]:
    """The last ``limit`` characters of ``text`` (non-strings as JSON-ish text) and how many were cut."""
    s = text if isinstance(text, str) else repr(text)
    cut = max(0, len(s) - limit)
    return strip_surrogates(s[cut:]), cut


@functools.lru_cache(maxsize=1)
def pygments_css() -> str:
    """The stylesheet for highlighted code (light theme)."""
    return _FORMATTER.get_style_defs(".hl")
