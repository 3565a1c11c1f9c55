"""How a prompt shows a program tree (:mod:`qdevolve.programtree`) and asks for per-file edits.

Each file is shown under a ``FILE: <path>`` line, in full, EVOLVE-BLOCK markers included;
files without markers are marked fixed. :func:`tree_note` is appended to the user message
of a tree parent: it asks for a ``FILE: <path>`` line before each file's SEARCH/REPLACE
blocks (or the file's full text, for a rewrite), the form :mod:`qdevolve.mutation.tree_edit`
parses. A one-file program is shown as before (its text).
"""

from __future__ import annotations

from qdevolve.programtree import TreeError, is_tree, parse_tree

__all__ = ["render_code", "tree_note"]

_START = "EVOLVE-BLOCK-START"


def render_code(code: str) -> str:
    """``code`` as a prompt shows it: a tree file by file, else the text itself."""
    if not is_tree(code):
        return code
    try:
        tree = parse_tree(code)
    except TreeError:
        return code
    parts = []
    for path, text in tree.files.items():
        tags = [t for t, on in (("main file", path == tree.main), ("fixed: no EVOLVE-BLOCK", _START not in text)) if on]
        parts.append(f"FILE: {path}" + (f"   ({', '.join(tags)})" if tags else "") + "\n" + text.rstrip("\n"))
    return "\n\n".join(parts)


def tree_note(code: str, edit_format: str) -> str:
    """The per-file instruction for a tree parent (``""`` for a one-file program)."""
    if not is_tree(code):
        return ""
    try:
        tree = parse_tree(code)
    except TreeError:
        return ""
    free = [p for p, t in tree.files.items() if _START in t]
    what = ("the file's full new text in a code block" if edit_format in ("rewrite", "crossover")
            else "that file's SEARCH/REPLACE blocks")
    return (f"\n# Files\nThis program has {len(tree.files)} files; only these may change: {', '.join(free)}. "
            f"For each file you change, write a line `FILE: <path>` and then {what}; "
            "edits apply to the named file only, inside its EVOLVE-BLOCK regions.\n")
