"""Archive-cell clusterer: the outer archive's niche as the strategy key (``archive_cell``).

Kind ``cluster``. The MAP-Elites niche (grid index, centroid id, ...) a completion's program
landed in is the outer loop's own notion of "different strategy"; using it as Rare's cluster
key makes the inner policy reward what the archive rewards (diversity-rl.md §4, "for
qdevolve"). The cell is read, in order, from:

1. ``metadata["archive_cell"]`` (or ``metadata["cell"]``) of the rollout / pair / program;
2. ``cells[program_id]`` - an optional mapping given to the constructor (e.g. built by the
   trainer from stored ``ArchiveEvent.cell`` values), looked up with the rollout's
   ``program_id`` or ``metadata["program_id"]``.

A completion without a cell (its program failed or was never inserted) gets ``missing``
(default ``"cell:none"``: all such completions share one cluster); ``missing=None`` makes it
an error. Keys look like ``cell:<cell>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from qdevolve import registry
from qdevolve.cluster import unpack

__all__ = ["ArchiveCellCluster"]


@registry.cluster("archive_cell")
class ArchiveCellCluster:
    """The niche of the completion's program in the outer archive."""

    def __init__(
        self, *, cells: Mapping[str, Any] | None = None, missing: str | None = "cell:none"
    ) -> None:
        self.cells = dict(cells or {})
        self.missing = missing

    def __call__(self, item: Any) -> str:
        inp = unpack(item)
        for key in ("archive_cell", "cell"):
            if inp.metadata.get(key) is not None:
                return f"cell:{inp.metadata[key]}"
        program_id = getattr(item, "program_id", None) or inp.metadata.get("program_id")
        if program_id is None and hasattr(item, "code"):
            program_id = getattr(item, "id", None)
        if program_id is not None and self.cells.get(program_id) is not None:
            return f"cell:{self.cells[program_id]}"
        if self.missing is None:
            raise ValueError(
                f"archive_cell clusterer: no cell for program {program_id!r}; set "
                "metadata['archive_cell'] or pass cells={program_id: cell}"
            )
        return self.missing
