"""Replies that edit a program tree: each edit names its file, and is applied to that file.

A reply to a tree parent (:mod:`qdevolve.programtree`) is cut into sections by ``FILE:``
lines; a section runs from its ``FILE: <path>`` line to the next one::

    FILE: heuristics.py
    <<<<<<< SEARCH
    ...
    >>>>>>> REPLACE
    FILE: main.py
    ```python
    <the whole file, for a rewrite>
    ```

Each section is parsed by the operator's own one-file parser (``diff``, ``rewrite``,
``crossover``: this module wraps them, it does not re-implement them) against that file
alone, then checked as a one-file child is: the file still parses (Python), only its
EVOLVE-BLOCK regions changed, and (Python) the fixed code keeps its meaning. Default deny:
a reply with no ``FILE:`` line, a path that is not in the tree, a file without
EVOLVE-BLOCK markers (in a tree those files are fixed), a file named twice, or any
section that fails is an invalid child, with the reason naming the file.

:func:`ast_mutate_tree` is the offline ``ast`` mutator's tree path: it mutates one Python
file with EVOLVE-BLOCKs at a time, the file drawn from the run's generator.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np

from qdevolve.languages import UnknownLanguage, language_for_path
from qdevolve.mutation._llm import ParseError, check_syntax
from qdevolve.mutation.blocks import START, edits_inside_blocks
from qdevolve.mutation.fixed_code import fixed_code_violation
from qdevolve.programtree import ProgramTree, TreeError, dump_tree, parse_tree
from qdevolve.types import Program

__all__ = ["split_by_file", "parse_tree_reply", "tree_violation", "evolvable_files", "file_language", "ast_mutate_tree"]

_FILE_LINE = re.compile(r"^[ \t>*#`]*FILE:[ \t]*`?([^\s`*]+)`?[ \t*]*$", re.MULTILINE)


def file_language(path: str) -> str:
    """The language name of ``path`` by extension (``""`` when unknown: never checked as code)."""
    try:
        return language_for_path(path).name
    except UnknownLanguage:
        return ""


def evolvable_files(tree: ProgramTree) -> list[str]:
    """The files of ``tree`` that have EVOLVE-BLOCK markers (the only ones that may change)."""
    return [p for p, text in tree.files.items() if START in text]


def split_by_file(reply: str, tree: ProgramTree) -> list[tuple[str, str]]:
    """``(path, section)`` per ``FILE:`` line of ``reply``, in order.

    Raises:
        ParseError: no ``FILE:`` line, a path not in the tree, a fixed file, or a file named twice.
    """
    marks = list(_FILE_LINE.finditer(reply))
    evolvable = evolvable_files(tree)
    if not marks:
        raise ParseError(f"the program has several files: put a line 'FILE: <path>' before the edits of each "
                         f"file (files that may change: {', '.join(evolvable)})")
    out: list[tuple[str, str]] = []
    for i, m in enumerate(marks):
        path = m.group(1)
        if path not in tree.files:
            raise ParseError(f"the reply names file {path[:80]!r}, which is not in the program "
                             f"(files: {', '.join(tree.files)})")
        if path not in evolvable:
            raise ParseError(f"{path}: has no EVOLVE-BLOCK markers, so it is fixed and may not change "
                             f"(files that may change: {', '.join(evolvable)})")
        if any(path == p for p, _ in out):
            raise ParseError(f"{path}: named by two FILE: lines; give each file's edits once")
        end = marks[i + 1].start() if i + 1 < len(marks) else len(reply)
        out.append((path, reply[m.end():end]))
    return out


ParseOne = Callable[[str, Program, list[Program]], "tuple[str, dict[str, Any]]"]


def parse_tree_reply(parse_one: ParseOne, reply: str, parent: Program,
                     others: list[Program]) -> tuple[str, dict[str, Any]]:
    """The child tree's serialised code and metadata (``files``: the changed paths).

    ``parse_one`` is the operator's one-file ``parse``; it sees each named file as a
    one-file parent (the other parents' file at the same path, for crossover).

    Raises:
        ParseError: see the module doc; the message names the file.
    """
    try:
        tree = parse_tree(parent.code)
    except TreeError as exc:
        raise ParseError(str(exc)) from None
    other_trees = []
    for o in others:
        try:
            other_trees.append(parse_tree(o.code))
        except TreeError:
            other_trees.append(None)
    changed, per_file = [], {}
    for path, section in split_by_file(reply, tree):
        lang = file_language(path)
        before = tree.files[path]
        one = Program(code=before, language=lang or parent.language, id=parent.id, run_id=parent.run_id)
        subs = [Program(code=t.files[path], language=one.language, id=o.id)
                for o, t in zip(others, other_trees, strict=True) if t is not None and path in t.files]
        try:
            after, meta = parse_one(section, one, subs)
            check_syntax(after, lang)
            if not edits_inside_blocks(before, after):
                raise ParseError("edit outside the EVOLVE-BLOCK markers: only code between "
                                 "EVOLVE-BLOCK-START and EVOLVE-BLOCK-END may change")
            if lang == "python":
                violation = fixed_code_violation(before, after)
                if violation is not None:
                    raise ParseError(violation)
            tree = tree.replace(path, after)
        except (ParseError, TreeError) as exc:
            raise ParseError(f"{path}: {exc}") from None
        if after != before:
            changed.append(path)
        per_file[path] = meta
    if not changed:
        raise ParseError("the reply changes no file")
    return dump_tree(tree), {"files": changed, "per_file": per_file}


def tree_violation(parent_code: str, child_code: str) -> str | None:
    """How a child breaks its tree parent's fixed parts, or ``None`` (either side a tree).

    The child must be a tree with the parent's main file and file set; a file without
    EVOLVE-BLOCK markers keeps its text; a file with markers changes only inside them and,
    in Python, keeps the meaning of its fixed code (:func:`fixed_code_violation`).
    """
    try:
        parent = parse_tree(parent_code)
    except TreeError as exc:
        return f"the parent is not a well-formed program tree ({exc})"
    try:
        child = parse_tree(child_code)
    except TreeError as exc:
        return f"the child of a program tree is not a well-formed tree ({exc})"
    if child.main != parent.main or list(child.files) != list(parent.files):
        return "the child adds, removes or renames files of the program tree; only EVOLVE-BLOCK regions may change"
    for path, before in parent.files.items():
        after = child.files[path]
        if after == before:
            continue
        if START not in before:
            return f"{path}: has no EVOLVE-BLOCK markers, so it is fixed and may not change"
        if not edits_inside_blocks(before, after):
            return f"{path}: the child changes the code outside the EVOLVE-BLOCK markers"
        if file_language(path) == "python":
            violation = fixed_code_violation(before, after)
            if violation is not None:
                return f"{path}: {violation}"
    return None


MutateOne = Callable[..., "tuple[str | None, list[str], str | None]"]


def ast_mutate_tree(mutate_code: MutateOne, code: str, rng: np.random.Generator,
                    exclude: set[str]) -> tuple[str | None, list[str], str | None]:
    """One child of tree ``code`` by ``mutate_code`` (the ``ast`` mutator's one-file edit) on
    one Python file with EVOLVE-BLOCKs, drawn from ``rng``; the next files in turn if it fails.

    Returns ``(child code, edits prefixed with the file, None)`` or ``(None, [], error)``.
    """
    try:
        tree = parse_tree(code)
    except TreeError as exc:
        return None, [], f"ast mutation: {exc}"
    files = [p for p in evolvable_files(tree) if file_language(p) == "python"]
    if not files:
        return None, [], "ast mutation: no Python file of the program tree has EVOLVE-BLOCK markers"
    seen = [t for t in map(_tree_or_none, exclude) if t is not None]
    first = int(rng.integers(0, len(files)))
    errors = []
    for k in range(len(files)):
        path = files[(first + k) % len(files)]
        before = tree.files[path]
        taken = {t.files[path] for t in seen if path in t.files} | {before}
        child, edits, error = mutate_code(before, rng, exclude=taken)
        if child is not None:
            return dump_tree(tree.replace(path, child)), [f"{path}: {e}" for e in edits], None
        errors.append(f"{path}: {error}")
    return None, [], "; ".join(errors)


def _tree_or_none(code: str) -> ProgramTree | None:
    try:
        return parse_tree(code)
    except TreeError:
        return None
