"""Programs of several files: a tree of files stored in one ``code`` field.

A program is either one file (its text is ``Program.code``) or a *tree*: several files, each
with its own EVOLVE-BLOCKs, one of them the *main* file the evaluator is handed. A tree is
stored in ``programs.code`` as a canonical, readable text (no schema change; the code hash,
dedupe, novelty, the viewer and ``lineage diff`` all see the whole tree)::

    # qdevolve program tree v1 main=main.py files=2
    # --- file: heuristics.py (412 chars)
    <the 412 characters of heuristics.py>
    # --- file: main.py (300 chars)
    <the 300 characters of main.py>

Files are sorted by path; each header gives the file's length in characters, so a file's
text may contain anything (a line that looks like a header included) and the text parses
back to exactly the same tree. Each file's text is followed by one newline that is not
part of it.

Paths are adversary input (a seed directory, a model's reply, a crafted database): a path
is relative, ``/``-separated, at most :data:`MAX_DEPTH` parts of ``[A-Za-z0-9_.-]`` that do
not start with a dot (so no ``..``, no hidden file, no clash with the sandbox's own files),
and no path is both a file and a directory; a tree has at most :data:`MAX_FILES` files and
:data:`MAX_TREE_CHARS` characters. Anything else is a :class:`TreeError` naming the path.

This module imports nothing from qdevolve (layer 1).
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ProgramTree", "TreeError", "is_tree", "parse_tree", "dump_tree", "check_path", "read_tree_dir", "file_pairs",
           "MAX_FILES", "MAX_TREE_CHARS", "MAX_DEPTH", "HEADER"]

HEADER = "# qdevolve program tree v1"
MAX_FILES = 64
MAX_TREE_CHARS = 4 << 20
MAX_DEPTH = 8
MAX_PATH_CHARS = 200
_PART = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
_HEAD = re.compile(r"^# qdevolve program tree v1 main=(\S+) files=(\d+)\n")
_FILE = re.compile(r"# --- file: (\S+) \((\d+) chars\)\n")
_SKIP_DIRS = {"__pycache__"}


class TreeError(ValueError):
    """A tree (or one of its paths) that is refused; the message names the path."""


def check_path(path: str) -> str:
    """``path`` when it is an acceptable relative file path (see the module doc), else :class:`TreeError`."""
    if not isinstance(path, str) or not path:
        raise TreeError(f"program tree: file path {path!r} is empty or not text")
    if len(path) > MAX_PATH_CHARS:
        raise TreeError(f"program tree: file path {path[:60]!r}... is over {MAX_PATH_CHARS} characters")
    if path.startswith("/") or "\\" in path:
        raise TreeError(f"program tree: file path {path!r} must be relative and '/'-separated")
    parts = path.split("/")
    if len(parts) > MAX_DEPTH:
        raise TreeError(f"program tree: file path {path!r} is more than {MAX_DEPTH} levels deep")
    for part in parts:
        if part in ("", ".", ".."):
            raise TreeError(f"program tree: file path {path!r} has an empty, '.' or '..' part")
        if not _PART.match(part):
            raise TreeError(f"program tree: file path {path!r}: each part is letters, digits, '_', '.', '-' "
                            f"and does not start with '.' or '-' ({part!r} is not)")
    return path


@dataclass(frozen=True)
class ProgramTree:
    """Files by relative path (sorted) and the main file's path.

    Raises:
        TreeError: a bad path, no files, too many files or characters, a main file that
            is not in the tree, or a path that is both a file and a directory.
    """

    files: dict[str, str]
    main: str

    def __post_init__(self) -> None:
        if not self.files:
            raise TreeError("program tree: it has no files")
        if len(self.files) > MAX_FILES:
            raise TreeError(f"program tree: {len(self.files)} files, over the limit of {MAX_FILES}")
        total = 0
        for p, text in self.files.items():
            check_path(p)
            if not isinstance(text, str):
                raise TreeError(f"program tree: {p}: the file's text is not a string")
            total += len(text)
        if total > MAX_TREE_CHARS:
            raise TreeError(f"program tree: {total} characters, over the limit of {MAX_TREE_CHARS}")
        dirs = {"/".join(p.split("/")[:i]) for p in self.files for i in range(1, p.count("/") + 1)}
        clash = sorted(dirs & set(self.files))
        if clash:
            raise TreeError(f"program tree: {clash[0]} is both a file and a directory")
        if self.main not in self.files:
            raise TreeError(f"program tree: the main file {self.main!r} is not one of its files")
        object.__setattr__(self, "files", dict(sorted(self.files.items())))

    def replace(self, path: str, text: str) -> ProgramTree:
        """A copy with file ``path`` (which must exist) set to ``text``."""
        if path not in self.files:
            raise TreeError(f"program tree: no file {path!r} (files: {', '.join(self.files)})")
        return ProgramTree({**self.files, path: text}, self.main)


def is_tree(code: str | None) -> bool:
    """True when ``code`` is a serialised tree (it starts with :data:`HEADER`)."""
    return isinstance(code, str) and code.startswith(HEADER + " ")


def dump_tree(tree: ProgramTree) -> str:
    """The canonical text of ``tree`` (see the module doc); ``parse_tree`` inverts it exactly."""
    out = [f"{HEADER} main={tree.main} files={len(tree.files)}\n"]
    for p, text in tree.files.items():
        out.append(f"# --- file: {p} ({len(text)} chars)\n")
        out.append(text)
        out.append("\n")
    return "".join(out)


def parse_tree(code: str) -> ProgramTree:
    """The tree serialised in ``code``.

    Raises:
        TreeError: ``code`` is not a well-formed tree (header, file headers, lengths) or
            the tree is refused (see :class:`ProgramTree`).
    """
    m = _HEAD.match(code)
    if m is None:
        raise TreeError("program tree: the first line is not '# qdevolve program tree v1 main=PATH files=N'")
    main, count = m.group(1), int(m.group(2))
    if count > MAX_FILES:
        raise TreeError(f"program tree: {count} files, over the limit of {MAX_FILES}")
    files: dict[str, str] = {}
    pos = m.end()
    for i in range(count):
        fm = _FILE.match(code, pos)
        if fm is None:
            raise TreeError(f"program tree: file header {i + 1} of {count} is missing or malformed")
        path, n = check_path(fm.group(1)), int(fm.group(2))
        if path in files:
            raise TreeError(f"program tree: {path} appears twice")
        start = fm.end()
        if start + n + 1 > len(code) or code[start + n] != "\n":
            raise TreeError(f"program tree: {path}: its text is not {n} characters followed by a newline")
        files[path] = code[start:start + n]
        pos = start + n + 1
    if pos != len(code):
        raise TreeError(f"program tree: {len(code) - pos} characters after its {count} files")
    tree = ProgramTree(files, main)
    if list(files) != list(tree.files):
        raise TreeError("program tree: its files are not sorted by path (not the canonical form)")
    return tree


def read_tree_dir(directory: str | Path, *, max_file_bytes: int = 2 << 20) -> ProgramTree:
    """The tree of the files under ``directory`` (a seed ``initial_program/``).

    The main file is the top-level ``main.<ext>``, else the only top-level file. Symbolic
    links, special files, hidden files and paths refused by :func:`check_path` are errors
    naming the file (default deny); ``__pycache__`` directories are skipped.

    Raises:
        TreeError: as above, or a file that is not UTF-8 text or is over ``max_file_bytes``.
    """
    root = Path(directory)
    files: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        for d in list(dirnames):
            full = here / d
            if d in _SKIP_DIRS:
                dirnames.remove(d)
            elif full.is_symlink():
                raise TreeError(f"{full}: is a symbolic link; a program tree holds regular files and directories only")
            else:
                check_path(full.relative_to(root).as_posix())
        for name in filenames:
            full = here / name
            rel = full.relative_to(root).as_posix()
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                raise TreeError(f"{full}: is a symbolic link; a program tree holds regular files only")
            if not stat.S_ISREG(st.st_mode):
                raise TreeError(f"{full}: is not a regular file")
            if name.endswith(".pyc"):
                continue
            try:
                check_path(rel)
            except TreeError as exc:
                raise TreeError(f"{full}: {exc}") from None
            if st.st_size > max_file_bytes:
                raise TreeError(f"{full}: {st.st_size} bytes, over the limit of {max_file_bytes}")
            if len(files) >= MAX_FILES:
                raise TreeError(f"{root}: more than {MAX_FILES} files in the program tree")
            try:
                files[rel] = full.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                raise TreeError(f"{full}: is not UTF-8 text") from None
    top = sorted(p for p in files if "/" not in p)
    mains = [p for p in top if p.rsplit(".", 1)[0] == "main"]
    if len(mains) == 1:
        main = mains[0]
    elif len(top) == 1:
        main = top[0]
    else:
        raise TreeError(f"{root}: no main file; name the file the evaluator is handed main.<ext> "
                        f"(top-level files: {', '.join(top) or 'none'})")
    try:
        return ProgramTree(files, main)
    except TreeError as exc:
        raise TreeError(f"{root}: {exc}") from None


def file_pairs(a_code: str, b_code: str) -> list[tuple[str, str, str]]:
    """``(path, a's text, b's text)`` per file of two programs, for a per-file diff: every
    path of either tree (``""`` for a missing file); ``[("", a_code, b_code)]`` unless both
    are well-formed trees."""
    try:
        a, b = parse_tree(a_code), parse_tree(b_code)
    except TreeError:
        return [("", a_code, b_code)]
    return [(p, a.files.get(p, ""), b.files.get(p, "")) for p in sorted(set(a.files) | set(b.files))]
