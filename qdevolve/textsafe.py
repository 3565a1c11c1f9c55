"""Make untrusted text (candidate code, model replies, stored names) safe to print or export.

Candidate programs and model replies are written by an adversary: printed raw they can move the
cursor, clear the screen, write the clipboard (OSC 52), make the terminal answer a device query
(``ESC[6n`` types into the shell), or reorder what the reader sees (bidi overrides). Every
command that shows stored, candidate or model text passes it through :func:`terminal_safe`,
which keeps newlines and tabs and replaces every other control character visibly.
"""

from __future__ import annotations

import re

__all__ = ["terminal_safe", "terminal_safe_line", "strip_surrogates", "dot_escape"]

# C0 controls except \t and \n, DEL, C1 controls, bidi embeddings/overrides/isolates,
# zero-width and line/paragraph separators that some terminals honour.
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f\x80-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff\ud800-\udfff]"
)
_UNSAFE_LINE = re.compile(
    "[\x00-\x1f\x7f\x80-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff\ud800-\udfff]"
)


def _visible(match: re.Match[str]) -> str:
    ch = match.group(0)
    code = ord(ch)
    if code == 0x1B:
        return "\\e"
    if code < 0x20 or code == 0x7F:
        return f"^{chr(code ^ 0x40)}"
    return f"\\u{code:04x}"


def terminal_safe(text: object) -> str:
    """Return ``text`` with every control character except ``\\n``/``\\t`` shown visibly.

    ``ESC`` becomes ``\\e``, other C0 controls ``^X`` (``\\r`` -> ``^M``, NUL -> ``^@``), and C1
    controls, bidi overrides/isolates, zero-width characters and lone surrogates ``\\uXXXX``.
    """
    return _UNSAFE.sub(_visible, str(text))


def terminal_safe_line(text: object) -> str:
    """Like :func:`terminal_safe` but also makes ``\\n`` and ``\\t`` visible (one-line fields)."""
    return _UNSAFE_LINE.sub(_visible, str(text))


def strip_surrogates(text: str) -> str:
    """Replace lone surrogates (not encodable as UTF-8) with U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


_SURROGATE = re.compile("[\ud800-\udfff]")


def dot_escape(text: object) -> str:
    """Escape text for a double-quoted Graphviz DOT string (no raw quotes, backslashes, newlines)."""
    s = terminal_safe_line(text)
    return s.replace("\\", "\\\\").replace('"', '\\"')
