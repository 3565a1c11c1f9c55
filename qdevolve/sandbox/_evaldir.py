"""The evaluator's directory, copied for the trusted side of the sandbox.

An evaluator often reads files beside itself (``Path(__file__).parent / "instances.json"``,
as OpenEvolve's examples do), so the whole directory travels with it: :func:`scan` lists what
is copied (regular files, at most :data:`MAX_FILES` files and :data:`MAX_BYTES` bytes, skipping
:data:`SKIP_DIRS`, run databases and symlinks) with a content-independent signature (names,
sizes, mtimes) so an unchanged directory is not read again; :func:`copy_dir` writes the copy
readable by the trusted runner only (``root:group``, modes 0750/0640; the candidate runs
under another uid and no group of the runner's).
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from qdevolve.errors import EvaluationSetupError

__all__ = ["MAX_BYTES", "MAX_FILES", "SKIP_DIRS", "SKIP_SUFFIXES", "EvalDir", "scan", "copy_dir"]

MAX_FILES = 2000
MAX_BYTES = 256 << 20
#: Directories never copied: caches, version control, virtual environments, run databases
#: (``archives``) and OpenEvolve's output directory.
SKIP_DIRS = frozenset({"__pycache__", ".git", ".hg", ".svn", ".venv", "venv", "node_modules", "archives",
                       ".mypy_cache", ".pytest_cache", ".ruff_cache", ".ipynb_checkpoints",
                       "openevolve_output"})
#: Files never copied: run databases (and their journals).
SKIP_SUFFIXES = (".sqlite", ".sqlite-wal", ".sqlite-shm", ".sqlite-journal", ".pyc")


@dataclass(frozen=True)
class EvalDir:
    """What of an evaluator's directory is copied: relative paths, total size, signature."""

    root: Path
    files: tuple[str, ...]
    total: int
    signature: str


def _skip_file(name: str) -> bool:
    return name.endswith(SKIP_SUFFIXES)


def scan(evaluator: Path, *, max_files: int = MAX_FILES, max_bytes: int = MAX_BYTES) -> EvalDir:
    """The files of ``evaluator``'s directory to copy (bounded; see the module doc).

    Raises:
        EvaluationSetupError: the evaluator cannot be read, or its directory holds more than
            ``max_files`` files or ``max_bytes`` bytes (naming the directory).
    """
    root = evaluator.parent
    if not evaluator.is_file():
        raise EvaluationSetupError(f"evaluator {evaluator} cannot be read: not a file")
    files: list[str] = []
    sig = hashlib.sha256()
    total = 0
    stack = [""]
    while stack:
        rel = stack.pop()
        try:
            entries = sorted(os.scandir(root / rel) if rel else os.scandir(root), key=lambda e: e.name)
        except OSError as exc:
            if not rel:
                raise EvaluationSetupError(f"evaluator directory {root} cannot be listed: {exc.strerror or exc}") from exc
            continue
        for entry in entries:
            path = f"{rel}/{entry.name}" if rel else entry.name
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                if entry.name not in SKIP_DIRS:
                    stack.append(path)
                continue
            if not stat.S_ISREG(st.st_mode) or (_skip_file(entry.name) and path != evaluator.name):
                continue  # symlinks, sockets, devices; run databases
            files.append(path)
            total += st.st_size
            if len(files) > max_files or total > max_bytes:
                raise EvaluationSetupError(
                    f"evaluator directory {root}: more than {max_files} files or {max_bytes >> 20} MiB "
                    f"(everything beside {evaluator.name} travels with it into the sandbox; "
                    f"{', '.join(sorted(SKIP_DIRS))} and *.sqlite are skipped). Move the evaluator "
                    "and its data into a directory of their own")
            sig.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}\n".encode())
    return EvalDir(root, tuple(sorted(files)), total, sig.hexdigest())


def copy_dir(found: EvalDir, dst: Path, *, group: int | None) -> str:
    """Copy ``found`` into the new directory ``dst``; return the digest of the copied content.

    ``group``: the copy is ``root:group``, directories 0750 and files 0640 (readable by the
    runner, whose gid that is, and nobody else); ``None`` (not root): owner-only modes.
    """
    digest = hashlib.sha256()
    dmode, fmode = (0o750, 0o640) if group is not None else (0o700, 0o600)
    dst.mkdir(mode=0o700)
    for rel in found.files:
        src = found.root / rel
        out = dst / rel
        out.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            data = src.read_bytes()
        except OSError as exc:
            raise EvaluationSetupError(f"evaluator directory {found.root}: {rel} cannot be read: "
                                       f"{exc.strerror or exc}") from exc
        digest.update(f"{rel}\0{len(data)}\0".encode())
        digest.update(data)
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
    for dirpath, dirnames, filenames in os.walk(dst):
        for name in filenames:
            _own(Path(dirpath, name), group, fmode)
        for name in dirnames:
            _own(Path(dirpath, name), group, dmode)
    _own(dst, group, dmode)
    return digest.hexdigest()


def _own(path: Path, group: int | None, mode: int) -> None:
    if group is not None:
        os.chown(path, 0, group, follow_symlinks=False)
    os.chmod(path, mode)
