"""Whole-run scans for the lineage views: a run's programs, their latest evaluation and
their genealogy parents, each read in one plain index-range scan through the driver's own
cursor and joined in Python by program id.

Joining in the database costs one index probe per program and table (about 5 µs each on
SQLite at 200,000 programs); the scans instead hand their rows to ``dict`` and ``map``,
which loop in C, so a whole run costs three sequential reads and a few C passes. The
evaluations, which a run stores in program order, are taken by slice while that order
holds. ``store`` may be a :class:`~qdevolve.db.store.LineageStore` or a
:class:`~qdevolve.db._view.SqliteView` (the standard ``sqlite3`` module, no SQLAlchemy).
"""

from __future__ import annotations

import contextlib
import gc
import re
from collections import Counter
from collections.abc import Iterator
from itertools import compress, repeat
from operator import itemgetter, lt, ne
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from qdevolve.db.store import LineageStore

__all__ = ["RunRows", "PAGE", "NO_EVAL", "quiet_gc", "genealogy"]

PAGE = 5000
NO_EVAL = (None, None, None)  # the latest-evaluation row of a program never evaluated
_SCAN_CACHE_KIB = 8192  # SQLite page cache while scanning a whole run (the store's default is 128 MiB)
_GENEALOGY = "FROM edges WHERE run_id = :r AND role <> 'inspiration'"
_AGGREGATE_MAX = 4_000_000  # edges read as one aggregated string (about 65 bytes each)


@contextlib.contextmanager
def quiet_gc() -> Iterator[None]:
    """No cyclic garbage collection while a whole run is loaded. The scans build only
    acyclic rows, but every full collection would walk all of them (a third of the time
    of a 200,000-program tree); reference counting still frees everything."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _dialect(store: Any) -> str:
    """``sqlite`` or the server's dialect name, for a store or a :class:`~qdevolve.db._view.SqliteView`."""
    return getattr(store, "dialect", None) or store.engine.dialect.name


def genealogy(edges: list[tuple[str, str, str, int]]) -> tuple[dict[str, str], dict[str, tuple[str, ...]]]:
    """:meth:`RunRows.parents` from the run's edge rows (:meth:`RunRows.edge_rows`), in C
    passes but for the children with several parents."""
    if "inspiration" in set(map(itemgetter(2), edges)):  # inspirations are not parents
        edges = list(compress(edges, map(ne, map(itemgetter(2), edges), repeat("inspiration"))))
    single = dict(zip(map(itemgetter(1), edges), map(itemgetter(0), edges), strict=True))
    multi: dict[str, tuple[str, ...]] = {}
    if len(single) != len(edges):
        counts = Counter(map(itemgetter(1), edges))
        several = set(compress(counts, map(lt, repeat(1), counts.values())))
        grouped: dict[str, list[tuple[int, str]]] = {}
        for parent, child, _role, pos in compress(edges, map(several.__contains__, map(itemgetter(1), edges))):
            grouped.setdefault(child, []).append((pos or 0, parent))
        for child, ps in grouped.items():
            multi[child] = tuple(p for _, p in sorted(ps))
            del single[child]
    return single, multi


class RunRows:
    """A run's nodes from plain scans: :meth:`parents` (the genealogy edges),
    :meth:`joined_pages` (the programs in insertion order with their latest evaluation, the
    last one per program winning) and :meth:`edges`/:meth:`edge_rows` (every edge, for the
    exports)."""

    def __init__(self, store: LineageStore, run_id: str) -> None:
        self.store, self.run_id = store, run_id

    @contextlib.contextmanager
    def cursor(self, sql: str, params: dict[str, Any]) -> Iterator[Any]:
        """The driver's cursor with ``sql`` executed (``:name`` parameters on every driver)."""
        view = getattr(self.store, "scan_cursor", None)  # a SqliteView: sqlite3 without SQLAlchemy
        if view is not None:
            with view(sql, params) as cur:
                yield cur
            return
        with self.store._connect() as c:
            sqlite = c.dialect.name == "sqlite"
            if not sqlite:  # sqlite3 reads :name, psycopg %(name)s
                sql = re.sub(r":(\w+)", r"%(\1)s", sql)
            cur = c.connection.dbapi_connection.cursor()
            try:
                if sqlite:  # a one-pass scan gains nothing from a big page cache
                    cur.execute(f"PRAGMA cache_size={-_SCAN_CACHE_KIB}")
                cur.execute(sql, params)
                yield cur
            finally:
                if sqlite:
                    from qdevolve.db._engine import CACHE_KIB

                    cur.execute(f"PRAGMA cache_size={-CACHE_KIB}")
                cur.close()

    def _scan(self, sql: str, params: dict[str, Any]) -> Iterator[list[tuple[Any, ...]]]:
        """Chunks of the rows of one query, straight from the driver's cursor."""
        with self.cursor(sql, params) as cur:
            while chunk := cur.fetchmany(PAGE):
                yield chunk

    def parents(self) -> tuple[dict[str, str], dict[str, tuple[str, ...]]]:
        """``(single, multi)``: child id -> its one parent id, and child id -> its parents
        (a crossover), ordered by edge position then id. Only the run's edges
        (``edges.run_id``) count; inspirations are not parents."""
        r = {"r": self.run_id}
        agg = "group_concat" if _dialect(self.store) == "sqlite" else "string_agg"
        with self.cursor(f"SELECT COUNT(*) {_GENEALOGY}", r) as cur:  # the index covers both scans
            n_edges = cur.fetchone()[0]
        words: list[str] = []
        if n_edges <= _AGGREGATE_MAX:  # one string, no row objects (both databases cap a string at 1 GB)
            with self.cursor(f"SELECT {agg}(child_id || ' ' || parent_id, ' ') {_GENEALOGY}", r) as cur:
                pairs = cur.fetchone()[0]
            words = pairs.split(" ") if pairs else []
            del pairs
        if len(words) == 2 * n_edges:
            it = iter(words)
            single = dict(zip(it, it, strict=True))
        else:  # an id holding a space, a very large run, or edges added meanwhile: read the rows
            with self.cursor(f"SELECT child_id, parent_id {_GENEALOGY}", r) as cur:
                single = dict(cur)
        del words
        multi: dict[str, tuple[str, ...]] = {}
        if n_edges != len(single):
            grouped: dict[str, list[tuple[int, str]]] = {}
            with self.cursor(f"SELECT child_id, parent_id, position {_GENEALOGY} AND child_id IN "
                             f"(SELECT child_id {_GENEALOGY} GROUP BY child_id HAVING COUNT(*) > 1)", r) as cur:
                for child, parent, pos in cur:
                    grouped.setdefault(child, []).append((pos or 0, parent))
            for child, ps in grouped.items():
                multi[child] = tuple(p for _, p in sorted(ps))
                single.pop(child, None)  # a live run may have added the edge since the first scan
        return single, multi

    def joined_pages(self, columns: str) -> Iterator[tuple[list[tuple[Any, ...]], list[str], list[Any]]]:
        """:meth:`program_pages` with each page's program ids and latest-evaluation rows
        ``(program_id, status, score)`` (:data:`NO_EVAL` when unevaluated). While the
        evaluations (each program evaluated at most once) lie in program order, as a run
        stores them, a page takes its slice of them; else it looks them up by id."""
        with self.cursor("SELECT program_id, status, score FROM evaluations WHERE run_id = :r "
                         "ORDER BY id", {"r": self.run_id}) as cur:
            evals = cur.fetchall()
        ev_ids = list(map(itemgetter(0), evals))
        aligned = len(set(ev_ids)) == len(ev_ids)  # no program evaluated twice: a slice is the latest
        latest: dict[str, Any] | None = None
        at = 0
        for rows in self.program_pages(columns):
            ids = list(map(itemgetter(1), rows))
            if aligned and ev_ids[at:at + len(ids)] == ids:
                evs = evals[at:at + len(ids)]
            else:
                aligned = False
                if latest is None:
                    latest = dict(zip(ev_ids, evals, strict=True))
                evs = list(map(latest.get, ids, repeat(NO_EVAL)))
            at += len(ids)
            yield rows, ids, evs

    def program_pages(self, columns: str) -> Iterator[list[tuple[Any, ...]]]:
        """Pages of ``(seq, <columns>)`` rows of the run's programs in insertion order. On
        SQLite one query is read a page at a time and ``seq`` is ``None`` (an integer object
        less per row); a server's driver may hold a whole result, so there each page is a
        query of its own, after the last ``seq``."""
        if _dialect(self.store) == "sqlite":
            yield from self._scan(f"SELECT NULL, {columns} FROM programs WHERE run_id = :r ORDER BY seq",
                                  {"r": self.run_id})
            return
        after = 0
        while True:
            rows = [row for chunk in self._scan(
                f"SELECT seq, {columns} FROM programs WHERE run_id = :r AND seq > :after "
                f"ORDER BY seq LIMIT :n", {"r": self.run_id, "after": after, "n": PAGE}) for row in chunk]
            if not rows:
                return
            yield rows
            after = rows[-1][0]

    def programs(self, columns: str) -> list[tuple[Any, ...]]:
        """Every ``(<columns>)`` row of the run's programs in insertion order, in one scan."""
        with self.cursor(f"SELECT {columns} FROM programs WHERE run_id = :r ORDER BY seq",
                         {"r": self.run_id}) as cur:
            return cur.fetchall()

    def edge_rows(self) -> list[tuple[str, str, str, int]]:
        """Every ``(parent, child, role, position)`` edge of the run, in the order of :meth:`edges`."""
        with self.cursor("SELECT parent_id, child_id, role, position FROM edges WHERE run_id = :r",
                         {"r": self.run_id}) as cur:
            return cur.fetchall()

    def edges(self) -> Iterator[list[tuple[str, str, str, int]]]:
        """Chunks of every ``(parent, child, role, position)`` edge of the run (callers keep
        those whose both ends are programs of the run)."""
        yield from self._scan("SELECT parent_id, child_id, role, position FROM edges WHERE run_id = :r",
                              {"r": self.run_id})

    def pages(self) -> Iterator[list[dict[str, Any]]]:
        """The run's nodes as dicts (with ``parent_ids``), a page at a time in insertion order."""
        rid = self.run_id
        with quiet_gc():
            single, multi = self.parents()
        for rows, pids, evs in self.joined_pages("id, generation, island, operator, policy_version"):
            page = []
            for (_seq, pid, gen, isl, op, pv), ev, one in zip(rows, evs, map(single.get, pids), strict=True):
                parent_ids = [one] if one is not None else list(multi.get(pid, ()))
                page.append({"id": pid, "run_id": rid, "generation": gen, "island": isl, "operator": op,
                             "policy_version": pv, "status": ev[1], "score": ev[2], "parent_ids": parent_ids})
            yield page
