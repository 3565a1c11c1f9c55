"""Archives (plugin kind ``archive``): where evaluated programs compete for niches.

Built-ins: ``map_elites`` (grid or CVT), ``islands`` (ring migration over any archive),
``dgm`` (keep every valid program), ``novelty`` (k-NN novelty with a threshold) and
``ribs`` (pyribs adapter, extra ``qd``) and ``pareto`` (the non-dominated front of several
objectives per niche). Each is created through the registry, e.g.
``registry.archive.create({"type": "map_elites", "bins": 8})``; the contract they share
is documented in :mod:`qdevolve.archive.base` and ``docs/archives.md``.

Classes are imported lazily, so ``import qdevolve.archive`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "ArchiveBase",
    "EmptyArchiveError",
    "MapElitesArchive",
    "IslandsArchive",
    "DGMArchive",
    "NoveltyArchive",
    "RibsArchive",
    "ParetoArchive",
]

_LAZY = {
    "ArchiveBase": "qdevolve.archive.base",
    "EmptyArchiveError": "qdevolve.archive.base",
    "MapElitesArchive": "qdevolve.archive.map_elites",
    "IslandsArchive": "qdevolve.archive.islands",
    "DGMArchive": "qdevolve.archive.dgm",
    "NoveltyArchive": "qdevolve.archive.novelty",
    "RibsArchive": "qdevolve.archive.ribs_adapter",
    "ParetoArchive": "qdevolve.archive.pareto",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'qdevolve.archive' has no attribute {name!r}")
