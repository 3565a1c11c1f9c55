"""The runner's import path refuses what the candidate could have written (stdlib only).

Staged next to ``runner.py``. The runner's own ``sys.path`` holds nothing the candidate can
write; an evaluator may still add a directory (often the program's: ``sys.path.insert(0,
os.path.dirname(program_path))``). :func:`install` puts a path hook first: a ``sys.path``
entry that is world-writable or owned by the candidate's uid gets a finder that finds only
the program itself (which the stand-in then replaces) and nothing else, so no module the
candidate planted there is ever imported by the trusted side.
"""

from __future__ import annotations

import os
import sys


class _ProgramOnly:
    """The finder of a directory the candidate may write: only the program is found there."""

    def __init__(self, entry: str, program: str) -> None:
        self.entry, self.program = entry, program

    def find_spec(self, name, target=None):
        from importlib import machinery

        path = os.path.join(self.entry, name.rpartition(".")[2] + ".py")
        try:
            if os.path.realpath(path) != self.program:
                return None
        except (OSError, ValueError):
            return None
        return machinery.ModuleSpec(name, machinery.SourceFileLoader(name, path), origin=path)

    def invalidate_caches(self) -> None:
        pass


def install(program: str, candidate_uid: int | None) -> None:
    """Guard every later ``sys.path`` lookup (see the module doc)."""
    real = os.path.realpath(program)
    own = os.getuid()

    def writable(entry: str) -> bool | None:
        try:
            st = os.stat(entry or ".")
        except OSError:
            return None
        return bool(st.st_mode & 0o002 or (candidate_uid is not None and candidate_uid != own
                                           and st.st_uid == candidate_uid))

    def hook(entry: str):
        if writable(entry):
            return _ProgramOnly(entry or ".", real)
        raise ImportError(entry)  # not the candidate's (or missing): the ordinary finders

    sys.path_hooks.insert(0, hook)
    # the finders cached so far (the stdlib, site-packages: read-only) stay; an entry the
    # candidate could write gets the guarded finder
    for entry in list(sys.path_importer_cache):
        if isinstance(entry, str) and writable(entry):
            sys.path_importer_cache[entry] = _ProgramOnly(entry or ".", real)
