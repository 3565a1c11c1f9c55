"""Whole-run scans for the lineage views: a run's programs with their latest evaluation and
genealogy parents, read in plain index-range scans through the driver's own cursor."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from qdevolve.db._engine import CACHE_KIB

if TYPE_CHECKING:
    from qdevolve.db.store import LineageStore

__all__ = ["RunRows", "PAGE"]

PAGE = 5000
_SCAN_CACHE_KIB = 8192  # SQLite page cache while scanning a whole run (the store's default is 128 MiB)


class RunRows:
    """A run's nodes, read in plain scans instead of one join per node: the run's genealogy
    edges (``edges.run_id``), its evaluations in id order (the last one per program wins),
    its programs in insertion order, then its edges again for the edge list. Each scan reads
    one index range through the driver's own cursor (no per-row SQLAlchemy objects), in
    chunks, so only two maps by program id are held (about 80 MB at 200,000 programs).
    """

    def __init__(self, store: LineageStore, run_id: str, *, keep_ids: bool = True) -> None:
        self.store, self.run_id, self.keep_ids = store, run_id, keep_ids
        self.latest: dict[str, tuple[str, float | None]] = {}
        self.parents: dict[str, Any] = {}
        self.ids: set[str] = set()  # the run's program ids (for :meth:`edges`; not kept for the tree)

    def _scan(self, sql: str, params: dict[str, Any]) -> Iterator[list[tuple[Any, ...]]]:
        """Chunks of the rows of one query, straight from the driver's cursor."""
        with self.store._connect() as c:
            if c.dialect.name != "sqlite":  # sqlite3 reads :name, psycopg %(name)s
                sql = re.sub(r":(\w+)", r"%(\1)s", sql)
            cur = c.connection.dbapi_connection.cursor()
            small = c.dialect.name == "sqlite"  # a one-pass scan gains nothing from a big page cache
            try:
                if small:
                    cur.execute(f"PRAGMA cache_size={-_SCAN_CACHE_KIB}")
                cur.execute(sql, params)
                while chunk := cur.fetchmany(PAGE):
                    yield chunk
            finally:
                if small:
                    cur.execute(f"PRAGMA cache_size={-CACHE_KIB}")
                cur.close()

    def raw_pages(self) -> Iterator[list[tuple[Any, ...]]]:
        """Pages of ``(seq, id, generation, island, operator, policy_version)``; meanwhile
        :attr:`latest` maps id -> ``(status, score)`` and :attr:`parents` id -> parent id (one
        parent) or ``[(position, parent), ...]``; both are emptied at the end."""
        r = {"r": self.run_id}
        parents = self.parents = {}
        for chunk in self._scan("SELECT child_id, parent_id, position FROM edges "
                                "WHERE run_id = :r AND role <> 'inspiration'", r):
            for b, a, pos in chunk:
                cur = parents.get(b)
                if cur is None:
                    parents[b] = a if not pos else [(pos, a)]
                else:
                    parents[b] = sorted([*([(0, cur)] if isinstance(cur, str) else cur), (pos or 0, a)])
        latest, intern = self.latest, sys.intern
        for chunk in self._scan("SELECT program_id, status, score FROM evaluations WHERE run_id = :r "
                                "ORDER BY id", r):
            for pid, st, sc in chunk:
                latest[pid] = (intern(st), sc)
        after = 0
        while True:
            rows = [row for chunk in self._scan(
                "SELECT seq, id, generation, island, operator, policy_version FROM programs "
                "WHERE run_id = :r AND seq > :after ORDER BY seq LIMIT :n", {**r, "after": after, "n": PAGE})
                for row in chunk]
            if not rows:
                break
            if self.keep_ids:
                self.ids.update(row[1] for row in rows)
            yield rows
            after = rows[-1][0]
        latest.clear()
        parents.clear()

    def edges(self) -> Iterator[list[tuple[str, str, str, int]]]:
        """Chunks of ``(parent, child, role, position)`` whose both ends are programs of the
        run (after :meth:`raw_pages`)."""
        ids = self.ids
        for chunk in self._scan("SELECT parent_id, child_id, role, position FROM edges WHERE run_id = :r",
                                {"r": self.run_id}):
            yield [e for e in chunk if e[0] in ids and e[1] in ids]

    def parent_list(self, pid: str) -> list[str]:
        ps = self.parents.pop(pid, None)
        return [] if ps is None else [ps] if isinstance(ps, str) else [x for _, x in ps]

    def pages(self) -> Iterator[list[dict[str, Any]]]:
        """The run's nodes as dicts (with ``parent_ids``), a page at a time in insertion order."""
        none, rid = (None, None), self.run_id
        for rows in self.raw_pages():
            page = []
            for _seq, pid, gen, isl, op, pv in rows:
                status, score = self.latest.get(pid, none)
                page.append({"id": pid, "run_id": rid, "generation": gen, "island": isl, "operator": op,
                             "policy_version": pv, "status": status, "score": score,
                             "parent_ids": self.parent_list(pid)})
            yield page
