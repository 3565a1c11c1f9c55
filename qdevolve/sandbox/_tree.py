"""Staging a program's files into a run's work directory (one file, or a whole tree).

* A one-file program is written as ``program.<ext>`` (its language's extension).
* A program tree (:mod:`qdevolve.programtree`) is written file by file at its relative
  paths under the work directory, the *evolved* text of every file (the child's own tree,
  never the seed's); the evaluator's ``program_path`` is the main file, its siblings beside
  it. The candidate runs with the work directory as its current directory and first
  ``sys.path`` entry, so the main file imports a sibling (``import heuristics``) as
  ``python main.py`` would.

Paths were checked when the tree was parsed (relative, no ``..``, no hidden names, so
nothing clashes with the runner's own ``.qdevolve-run``); files are created with
``O_EXCL | O_NOFOLLOW`` in the fresh work directory all the same.

:class:`TreeCold` sends trees past the warm template (which stages one file) to the cold
path, and turns a tree that does not parse into an error result instead of an exception.
"""

from __future__ import annotations

import os
from pathlib import Path

from qdevolve.languages import extension as _language_extension
from qdevolve.programtree import TreeError, is_tree, parse_tree
from qdevolve.types import EvalResult, Program

__all__ = ["stage_program", "TreeCold", "refuse_tree"]


def _write_new(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)


def stage_program(work: Path, program: Program) -> list[Path]:
    """Write ``program`` into ``work``; the written paths, the main file first, then the
    other files and the directories made for them (to hand to the sandbox uid).

    Raises:
        TreeError: ``program.code`` is a tree that does not parse.
    """
    if not is_tree(program.code):
        main = work / ("program" + _language_extension(program.language))
        _write_new(main, program.code)
        return [main]
    tree = parse_tree(program.code)
    made: list[Path] = []
    for rel, text in tree.files.items():
        target = work
        for part in rel.split("/")[:-1]:
            target = target / part
            if not target.exists():
                target.mkdir(mode=0o755)
                made.append(target)
        _write_new(work / rel, text)
        if rel != tree.main:
            made.append(work / rel)
    return [work / tree.main, *made]


def refuse_tree(program: Program, backend: str) -> EvalResult | None:
    """An error result for a tree that does not parse (``None``: stage it)."""
    if not is_tree(program.code):
        return None
    try:
        parse_tree(program.code)
    except TreeError as exc:
        return EvalResult(status="error", error=f"{backend} sandbox: {exc}")
    return None


class TreeCold:
    """Mixed in before :class:`~qdevolve.sandbox._warm.WarmPath`: a tree is evaluated cold."""

    def evaluate(self, program, evaluator=None, limits=None, *, cascade_thresholds=None):
        """As the next ``evaluate`` in the MRO; a tree skips the warm template."""
        if not is_tree(program.code):
            return super().evaluate(program, evaluator, limits, cascade_thresholds=cascade_thresholds)
        bad = refuse_tree(program, getattr(self, "name", "process"))
        if bad is not None:
            return bad
        from qdevolve.sandbox._process import ProcessSandbox

        return ProcessSandbox.evaluate(self, program, evaluator, limits, cascade_thresholds=cascade_thresholds)
