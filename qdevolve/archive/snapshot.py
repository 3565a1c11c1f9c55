"""Archive snapshots: an archive's whole state as JSON, and the archive rebuilt from it.

``qdevolve archive stats`` rebuilds a run's archive by replaying ``add`` over every stored
evaluation (:mod:`qdevolve.archive.replay`); at 200,000 programs that replay is most of the
command's time. The engine therefore stores the archive's state with the run every
:data:`SNAPSHOT_EVERY` tells (table ``archive_snapshots``, written in the tell's own
transaction), and the reader restores the latest snapshot and replays only the evaluations
after it. Because ``add`` is deterministic and a snapshot holds *all* the state ``add`` reads
(elites in insertion order, children counts of every parent, feature ranges, the diversity
reference set, cell maps, k-NN bookkeeping, island counters and migrants), restoring a
snapshot taken after the first ``k`` adds and replaying the rest gives exactly the archive a
full replay gives (tests check this on real runs for every built-in kind).

Each archive owns its state: ``state()`` and ``load_state()`` on the archive class, declared
complete with ``owns_state = True`` on that class itself (``map_elites`` grid and CVT,
``novelty``, ``dgm``, ``pareto``, ``ribs``, whose pyribs grid is refilled from the elites, and
``islands`` over any of them). An archive without it (a plugin, or a subclass that did not declare it)
has no snapshot (:func:`snapshot` returns ``None``) and is always replayed in full.
Floats are written with ``repr`` precision (Python's ``json``), so values round-trip exactly;
non-finite ones use JSON's ``Infinity``/``NaN`` extension, which Python's ``json`` reads back.
"""

from __future__ import annotations

import json
import os
from typing import Any

from qdevolve import registry

__all__ = ["SNAPSHOT_EVERY", "BYTES_PER_TELL", "FORMAT", "SnapshotSchedule", "snapshot", "restore",
           "supports", "encode", "decode"]

SNAPSHOT_EVERY = 1000  # tells between two snapshots: a reader replays at most this many adds
BYTES_PER_TELL = 2048  # a large state is written less often: at most ~2 KiB per tell on average
FORMAT = 1  # bumped when the state layout changes; a reader ignores other formats


def supports(archive: Any) -> bool:
    """True when ``archive``'s own ``state()`` is complete (module docstring)."""
    complete = getattr(archive, "state_complete", None)  # islands: every island's archive
    if isinstance(complete, bool):
        return complete and type(archive).__dict__.get("owns_state", False)
    return bool(type(archive).__dict__.get("owns_state", False))


class SnapshotSchedule:
    """Decides when a tell carries a snapshot: every ``every`` tells of this process, or
    less often for a large state (``len(encoded) / BYTES_PER_TELL`` tells), so writing
    snapshots costs at most about :data:`BYTES_PER_TELL` bytes per tell on average.

    ``every`` defaults to ``QDEVOLVE_SNAPSHOT_EVERY`` or :data:`SNAPSHOT_EVERY` (0: never).
    The engine calls :meth:`due` once per tell, right after that tell's ``archive.add``
    (never for seeds: every seed is added before the first seed is stored); it returns the
    encoded state to store in the same transaction as the tell's rows, or ``None``.
    """

    def __init__(self, every: int | None = None) -> None:
        self.every = int(every if every is not None else os.environ.get("QDEVOLVE_SNAPSHOT_EVERY", SNAPSHOT_EVERY))
        self.tells = 0
        self.next = self.every

    def due(self, archive: Any) -> str | None:
        self.tells += 1
        if self.every <= 0 or self.tells < self.next or not supports(archive):
            return None
        data = encode(snapshot(archive))
        self.next = self.tells + max(self.every, len(data) // BYTES_PER_TELL)
        return data


def encode(state: dict[str, Any] | None) -> str:
    """Compact JSON (floats exact; non-finite ones as ``Infinity``/``NaN``)."""
    return json.dumps(state, separators=(",", ":"))


def decode(data: str) -> dict[str, Any]:
    return json.loads(data)


def snapshot(archive: Any) -> dict[str, Any] | None:
    """The archive's complete state as a JSON-ready dict (``None``: a kind without one)."""
    if not supports(archive):
        return None
    return {"format": FORMAT, "archive": archive.state()}


def restore(spec: dict[str, Any] | str, state: dict[str, Any]) -> Any:
    """A new archive from ``spec`` with the state of :func:`snapshot` loaded into it.

    Raises:
        ValueError: the snapshot does not fit the spec (another kind, island count or format).
    """
    if state.get("format") != FORMAT:
        raise ValueError(f"snapshot format {state.get('format')!r}, this qdevolve reads {FORMAT}")
    arc = registry.archive.create(spec)
    if not supports(arc):
        raise ValueError(f"archive {getattr(arc, 'name', arc)!r} has no snapshot")
    arc.load_state(state["archive"])
    return arc
