"""The ``--plugin`` files of a stored run, loaded again on ``resume``.

A run records each plugin file it loads (path, SHA-256 of its bytes, the plugins it
registered) when it starts. ``resume`` loads them again:

* a file whose bytes changed since it was recorded is loaded with a warning naming both
  hashes (the run goes on with the new code, and the new hash is recorded);
* a file that is gone is an error naming it and saying how to go on:
  ``qdevolve resume --plugin NEW_PATH``;
* ``resume --plugin FILE`` loads FILE in place of the recorded file it stands for (the same
  file name, the same bytes, or a plugin name in common) and records it, so later resumes
  find it without the option; a FILE that stands for no recorded file is a new plugin file
  of the run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from qdevolve import registry
from qdevolve.errors import PluginError

__all__ = ["current_plugin_files", "reload_plugin_files"]


def _names(row: dict[str, Any]) -> set[tuple[str, str]]:
    import json

    raw = row.get("names")
    try:
        names = json.loads(raw) if isinstance(raw, str) else (raw or [])
    except ValueError:
        names = []
    return {tuple(n) for n in names if isinstance(n, (list, tuple)) and len(n) == 2}


def _stands_for(path: str, sha256: str, names: set[tuple[str, str]], row: dict[str, Any]) -> bool:
    """Whether a file (``path``, ``sha256``, ``names``) replaces the recorded ``row``."""
    return (Path(path).name == Path(row["path"]).name or sha256 == row["sha256"]
            or bool(names & _names(row)))


def current_plugin_files(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The run's plugin files now: each recorded row not replaced by a later one, in order."""
    out: list[dict[str, Any]] = []
    for i, row in enumerate(rows):
        later = rows[i + 1:]
        if not any(_stands_for(r["path"], r["sha256"], _names(r), row) for r in later):
            out.append(row)
    return out


def reload_plugin_files(store: Any, run_id: str, given: Sequence[Path] = (),
                        warn: Callable[[str], None] = lambda _m: None) -> list[registry.PluginFile]:
    """Load the run's plugin files (``given`` first, standing in for recorded ones).

    Raises:
        PluginError: a recorded file is gone and no ``given`` file stands for it.
    """
    from qdevolve.evolve.setup.validate import check_plugin_file

    loaded = [registry.load_plugin_file(check_plugin_file(p)) for p in given]
    recorded = current_plugin_files(store.plugin_files(run_id))
    for row in recorded:
        stand_in = next((pf for pf in loaded if _stands_for(pf.path, pf.sha256, set(pf.names), row)), None)
        if stand_in is not None:
            if stand_in.sha256 != row["sha256"]:
                warn(f"plugin file {stand_in.path} differs from the one run {run_id[:12]} recorded "
                     f"({row['path']}, sha256 {row['sha256'][:12]} -> {stand_in.sha256[:12]}); "
                     "resuming with the new code")
            continue
        path = Path(row["path"])
        if not path.is_file():
            raise PluginError(
                f"run {run_id[:12]} was started with the plugin file {row['path']} (sha256 {row['sha256'][:12]}), "
                f"which no longer exists; pass its new location: qdevolve resume --plugin NEW_PATH")
        pf = registry.load_plugin_file(check_plugin_file(path))
        if pf.sha256 != row["sha256"]:
            warn(f"plugin file {row['path']} changed since run {run_id[:12]} recorded it "
                 f"(sha256 {row['sha256'][:12]} -> {pf.sha256[:12]}); resuming with the new code")
            store.add_plugin_file(run_id, pf.path, pf.sha256, pf.names)
    known = {(r["path"], r["sha256"]) for r in recorded}
    for pf in loaded:
        if (pf.path, pf.sha256) not in known:
            store.add_plugin_file(run_id, pf.path, pf.sha256, pf.names)
    return loaded
