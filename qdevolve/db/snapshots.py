"""Stored archive snapshots (table ``archive_snapshots``, schema v3): write one inside a
tell's transaction, find the newest one a reader can trust.

A snapshot row records the evaluation it was taken after (``eval_id``: the run's highest
evaluation id when the snapshot's transaction wrote it), how many evaluations of the run it
covers and the highest archive-event id then. The archive replay order is "by each
program's latest evaluation id", so a snapshot covers exactly the replay's first
``evaluations`` rows as long as (a) every evaluation with ``id <= eval_id`` is still there
and (b) no program it covers was evaluated again later (its replay position would move).
:func:`latest` checks both in the database and skips a snapshot that fails either; a run
with no usable snapshot (or a database older than v3) is replayed in full.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import Connection, text

if TYPE_CHECKING:
    from qdevolve.db.store import LineageStore

__all__ = ["KEEP", "StoredSnapshot", "write_snapshot", "latest", "format_of"]

_FORMAT = re.compile(r'\{\s*"format"\s*:\s*(\d+)')
KEEP = 2  # snapshots kept per run (the older one is the fallback if the newer fails a check)


@dataclass
class StoredSnapshot:
    """A snapshot row: the archive state and what it covers."""

    eval_id: int
    evaluations: int
    event_id: int
    state: dict


def write_snapshot(c: Connection, run_id: str, data: str) -> None:
    """Insert a snapshot of the run's archive taken after its latest evaluation (call inside
    the transaction that stores that evaluation) and drop all but the newest :data:`KEEP`."""
    p = {"r": run_id}
    eval_id, n = c.execute(text("SELECT MAX(id), COUNT(*) FROM evaluations WHERE run_id = :r"), p).one()
    if eval_id is None:
        return
    event_id = c.execute(text("SELECT MAX(id) FROM archive_events WHERE run_id = :r"), p).scalar() or 0
    c.execute(text("INSERT INTO archive_snapshots (run_id, eval_id, evaluations, event_id, format, state, "
                   "created_at) VALUES (:r, :e, :n, :v, :f, :s, :t)"),
              {**p, "e": eval_id, "n": n, "v": event_id, "f": format_of(data), "s": data, "t": time.time()})
    old = [i for (i,) in c.execute(text("SELECT id FROM archive_snapshots WHERE run_id = :r "
                                        "ORDER BY eval_id DESC, id DESC"), p)][KEEP:]
    if old:
        c.execute(text(f"DELETE FROM archive_snapshots WHERE id IN ({', '.join(str(int(i)) for i in old)})"))


def _covers_prefix(c: Connection, run_id: str, eval_id: int, evaluations: int) -> bool:
    p = {"r": run_id, "e": eval_id}
    n = c.execute(text("SELECT COUNT(*) FROM evaluations WHERE run_id = :r AND id <= :e"), p).scalar()
    if n != evaluations:
        return False
    moved = c.execute(text("SELECT 1 FROM evaluations t JOIN evaluations o ON o.program_id = t.program_id "
                           "AND o.id <= :e WHERE t.run_id = :r AND t.id > :e LIMIT 1"), p).first()
    return moved is None


def format_of(data: str) -> int:
    """The layout number an encoded snapshot declares first (``{"format":N,...``); 0 if none.
    The archive side owns the layout (:data:`qdevolve.archive.snapshot.FORMAT`); the store only
    records it, so a reader can skip snapshots of another layout without decoding them."""
    m = _FORMAT.match(data)
    return int(m.group(1)) if m else 0


def latest(store: LineageStore, run_id: str, *, fmt: int | None = None) -> StoredSnapshot | None:
    """The newest snapshot of the run (of layout ``fmt``, when given) that passes the checks
    above, or ``None``."""
    with store._connect() as c:
        if not store.engine.dialect.has_table(c, "archive_snapshots"):
            return None
        where = "" if fmt is None else " AND format = :f"
        rows = c.execute(text("SELECT id, eval_id, evaluations, event_id FROM archive_snapshots "
                              f"WHERE run_id = :r{where} ORDER BY eval_id DESC, id DESC"),
                         {"r": run_id, "f": fmt}).all()
        for sid, eval_id, n, event_id in rows:
            if _covers_prefix(c, run_id, eval_id, n):
                data = c.execute(text("SELECT state FROM archive_snapshots WHERE id = :i"), {"i": sid}).scalar()
                try:
                    state = json.loads(data)
                except ValueError:
                    continue
                return StoredSnapshot(int(eval_id), int(n), int(event_id or 0), state)
    return None
