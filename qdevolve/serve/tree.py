"""The lineage tree of a run, cut to what a browser can draw.

A run can hold 100,000 programs; a page draws at most ``limit`` nodes (default 1,000). The
nodes are chosen in priority order and each brings its ancestors (up to the focus root), so
what is drawn is always a connected tree:

1. the best path: the primary-parent chain from the root to the best ``ok`` program;
2. every child of a best-path node, failures included (what was tried at each step);
3. the remaining programs that pass the filters, best score first (unscored last, oldest first).

A program kept only to connect a match to its root is marked ``context`` (drawn faded). Each
node reports ``hidden``: how many of its descendants are not drawn, so the page can offer to
focus on it (``root=``), which draws its subtree with the same rule: paging by subtree.
The primary parent is the position-0 parent edge; further (crossover) parents are listed.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from qdevolve.serve import queries as Q
from qdevolve.serve.db import ReadOnlyDB

__all__ = ["TreeQuery", "RunLineage", "LineageCache", "DEFAULT_LIMIT", "MAX_LIMIT"]

DEFAULT_LIMIT = 1000
MAX_LIMIT = 20000


@dataclass(frozen=True)
class TreeQuery:
    """What to draw: filters, the focus root and the node budget."""

    limit: int = DEFAULT_LIMIT
    statuses: frozenset[str] = frozenset()  # empty: all; "failed" = any non-ok; "pending" = not evaluated
    operators: frozenset[str] = frozenset()
    gen_min: int | None = None
    gen_max: int | None = None
    policy_versions: frozenset[int] = frozenset()
    root: str | None = None


@dataclass
class RunLineage:
    """A run's lineage held in arrays, built once per change of the run (see :class:`LineageCache`)."""

    ids: list[str]
    gen: np.ndarray
    island: list[Any]
    op: list[Any]
    pv: list[Any]
    status: list[Any]
    score: np.ndarray  # NaN where not scored
    parent: np.ndarray  # primary parent index, -1 for a root
    extra_parents: dict[int, list[str]]
    children: list[list[int]]
    order: list[int]  # parents before children
    subtree: np.ndarray  # size of each program's subtree (itself included)
    index: dict[str, int] = field(default_factory=dict)
    ok: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))  # status == "ok"
    rank: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # by score desc, then age
    pos: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # index -> place in order
    facets_all: dict[str, Any] = field(default_factory=dict)  # filter choices over the whole run
    best_all: int = -1  # the run's best ok program

    @classmethod
    def from_rows(cls, rows: dict[str, Any]) -> RunLineage:
        """Build from :func:`queries.lineage_rows` (plain-list loops: faster than numpy scalars)."""
        ids = rows["id"]
        n = len(ids)
        index = {pid: i for i, pid in enumerate(ids)}
        get = index.get
        parent = [get(p, -1) if p is not None else -1 for p in rows["parent"]]
        children: list[list[int]] = [[] for _ in range(n)]
        for i, j in enumerate(parent):
            if j >= 0:
                if j == i:
                    parent[i] = -1
                else:
                    children[j].append(i)
        extra = {index[c]: ps for c, ps in rows.get("extra_parents", {}).items() if c in index}
        par = np.asarray(parent, dtype=np.int64)
        if bool((par < np.arange(n)).all()):
            order = list(range(n))  # insertion order already puts parents first (always, for a run)
        else:
            order = []
            seen = bytearray(n)
            for r in range(n):
                if parent[r] >= 0:
                    continue
                stack = [r]
                while stack:
                    i = stack.pop()
                    if seen[i]:
                        continue
                    seen[i] = 1
                    order.append(i)
                    stack.extend(children[i])
        subtree = [1] * n
        for i in reversed(order):
            j = parent[i]
            if j >= 0:
                subtree[j] += subtree[i]
        score = np.array([np.nan if s is None else s for s in rows["score"]], dtype=float)
        key = np.where(np.isnan(score), -np.inf, score)
        pos = np.empty(n, dtype=np.int64)
        pos[np.asarray(order, dtype=np.int64)] = np.arange(len(order))
        out = cls(ids=ids, gen=np.asarray(rows["gen"], dtype=np.int64), island=rows["island"], op=rows["op"],
                  pv=rows["pv"], status=rows["status"], score=score, parent=np.asarray(parent, dtype=np.int64),
                  extra_parents=extra, children=children, order=order,
                  subtree=np.asarray(subtree, dtype=np.int64), index=index,
                  ok=np.array([s == "ok" for s in rows["status"]], dtype=bool),
                  rank=np.lexsort((np.arange(n), -key)), pos=pos)
        out.facets_all = out._facets(range(n))
        out.best_all = out.best(np.ones(n, dtype=bool))
        return out

    def extended(self, delta: dict[str, Any]) -> RunLineage:
        """A new lineage: this one plus ``delta`` (:func:`queries.lineage_rows` with ``after_*``).

        Costs the new programs' ancestor walks and a few vector operations, not a rebuild, so a
        page following a 100,000-program run that is still writing stays cheap. ``self`` is
        not modified (requests reading it concurrently see a consistent tree).
        """
        n_old, new_ids = len(self.ids), delta["id"]
        ids = self.ids + new_ids
        index = dict(self.index)
        index.update((pid, n_old + k) for k, pid in enumerate(new_ids))
        status = list(self.status) + list(delta["status"])
        score = np.concatenate([self.score, np.array([np.nan if v is None else v for v in delta["score"]], dtype=float)])
        for pid, (st, sc) in delta["evaluations"].items():
            i = index.get(pid)
            if i is not None:
                status[i] = st
                score[i] = np.nan if sc is None else sc
        parent = np.concatenate([self.parent, np.full(len(new_ids), -1, dtype=np.int64)])
        children = list(self.children) + [[] for _ in new_ids]
        subtree = np.concatenate([self.subtree, np.ones(len(new_ids), dtype=np.int64)])
        copied: set[int] = set()
        for k, p in enumerate(delta["parent"]):
            i, j = n_old + k, index.get(p, -1) if p is not None else -1
            if j < 0 or j == i:
                continue
            parent[i] = j
            if j not in copied:
                children[j] = list(children[j])
                copied.add(j)
            children[j].append(i)
            while j >= 0:  # the new program counts in every ancestor's subtree
                subtree[j] += 1
                j = int(parent[j])
        extra = dict(self.extra_parents)
        extra.update((index[c], ps) for c, ps in delta.get("extra_parents", {}).items() if c in index)
        n = len(ids)
        order = self.order + list(range(n_old, n))
        pos = np.concatenate([self.pos, np.arange(len(self.order), len(order))])
        key = np.where(np.isnan(score), -np.inf, score)
        out = RunLineage(ids=ids, gen=np.concatenate([self.gen, np.asarray(delta["gen"], dtype=np.int64)]),
                         island=self.island + delta["island"], op=self.op + delta["op"], pv=self.pv + delta["pv"],
                         status=status, score=score, parent=parent, extra_parents=extra, children=children,
                         order=order, subtree=subtree, index=index, ok=np.array([v == "ok" for v in status], dtype=bool),
                         rank=np.lexsort((np.arange(n), -key)), pos=pos)
        fresh = out._facets(range(n_old, n)) if new_ids else {}
        merged = {k: sorted(set(v) | set(fresh.get(k, []))) for k, v in self.facets_all.items() if k != "gen_max"}
        merged["statuses"] = sorted({str(v) for v in status if v is not None})
        merged["gen_max"] = max(self.facets_all.get("gen_max", 0), fresh.get("gen_max", 0))
        out.facets_all = merged
        out.best_all = out.best(np.ones(n, dtype=bool))
        return out

    def _facets(self, idx: Any) -> dict[str, Any]:
        idx = list(idx)
        return {
            "operators": sorted({str(self.op[i]) for i in idx if self.op[i] is not None}),
            "statuses": sorted({str(self.status[i]) for i in idx if self.status[i] is not None}),
            "islands": sorted({int(self.island[i]) for i in idx if self.island[i] is not None}),
            "policy_versions": sorted({int(self.pv[i]) for i in idx if self.pv[i] is not None}),
            "gen_max": int(self.gen[idx].max()) if idx else 0,
        }

    # ------------------------------------------------------------------ selection
    def best(self, scope: np.ndarray) -> int:
        """Index of the best ``ok`` program in ``scope`` (earliest among equals), -1 if none."""
        ok = scope & self.ok & ~np.isnan(self.score)
        if not ok.any():
            return -1
        cand = np.flatnonzero(ok)
        return int(cand[np.argmax(self.score[cand])])

    def _scope(self, root: int) -> np.ndarray:
        mask = np.zeros(len(self.ids), dtype=bool)
        if root < 0:
            mask[:] = True
            return mask
        stack = [root]
        while stack:
            i = stack.pop()
            mask[i] = True
            stack.extend(self.children[i])
        return mask

    def _matches(self, q: TreeQuery) -> np.ndarray:
        n = len(self.ids)
        m = np.ones(n, dtype=bool)
        if q.statuses:
            want = q.statuses
            m &= np.array([(s in want) or (s is None and "pending" in want)
                           or (s is not None and s != "ok" and "failed" in want) for s in self.status], dtype=bool)
        if q.operators:
            m &= np.array([o in q.operators for o in self.op], dtype=bool)
        if q.policy_versions:
            m &= np.array([v in q.policy_versions for v in self.pv], dtype=bool)
        if q.gen_min is not None:
            m &= self.gen >= q.gen_min
        if q.gen_max is not None:
            m &= self.gen <= q.gen_max
        return m

    def select(self, q: TreeQuery) -> dict[str, Any]:
        """The nodes to draw for ``q`` and a summary of what was left out (see module doc)."""
        root = -1
        if q.root is not None:
            if q.root not in self.index:
                raise Q.NotFound(f"program {q.root!r} is not in this run")
            root = self.index[q.root]
        scope = self._scope(root)
        match = self._matches(q) & scope
        best = self.best(scope) if root >= 0 else self.best_all
        path: list[int] = []
        i = best
        while i >= 0:
            path.append(i)
            if i == root:
                break
            i = int(self.parent[i])
        path.reverse()
        limit = max(1, min(int(q.limit), MAX_LIMIT))
        ranked = self.rank[match[self.rank]]
        shown = np.zeros(len(self.ids), dtype=bool)
        count = 0
        on_path = set(path)
        tiers = (path, [c for p in path for c in self.children[p]], ranked.tolist())
        full = False
        for tier in tiers:
            for i in tier:
                chain, j = [], i
                while j >= 0 and not shown[j]:
                    chain.append(j)
                    if j == root:
                        break
                    j = int(self.parent[j])
                if count + len(chain) > limit:
                    full = True
                    break
                shown[chain] = True
                count += len(chain)
            if full:
                break
        return self._payload(q, root, scope, match, shown, on_path, best)

    def _payload(self, q: TreeQuery, root: int, scope: np.ndarray, match: np.ndarray, shown: np.ndarray,
                 on_path: set[int], best: int) -> dict[str, Any]:
        idx = np.flatnonzero(shown)
        idx = idx[np.argsort(self.pos[idx])].tolist()  # parents before children
        parent = self.parent
        drawn = dict.fromkeys(idx, 0)
        for i in reversed(idx):
            drawn[i] += 1
            p = int(parent[i])
            if p >= 0 and i != root and p in drawn:
                drawn[p] += drawn[i]
        nodes = []
        for i in idx:
            p = int(parent[i])
            sc = self.score[i]
            nodes.append({
                "id": self.ids[i], "parent": self.ids[p] if p >= 0 and i != root and shown[p] else None,
                "gen": int(self.gen[i]), "island": self.island[i], "op": self.op[i], "pv": self.pv[i],
                "status": self.status[i], "score": None if np.isnan(sc) else float(sc),
                "hidden": int(self.subtree[i] - drawn[i]), "best_path": i in on_path, "best": i == best,
                "context": not bool(match[i]), "extra_parents": self.extra_parents.get(i, []),
            })
        n_match = int(match.sum())
        return {
            "nodes": nodes,
            "root": self.ids[root] if root >= 0 else None,
            "best": self.ids[best] if best >= 0 else None,
            "best_score": None if best < 0 else float(self.score[best]),
            "total": len(self.ids), "in_scope": int(scope.sum()), "matching": n_match,
            "shown": len(nodes), "truncated": bool(n_match > sum(1 for n in nodes if not n["context"])),
            "facets": self.facets_all if root < 0 else self._facets(np.flatnonzero(scope)),
            "query": {"limit": q.limit, "statuses": sorted(q.statuses), "operators": sorted(q.operators),
                      "gen_min": q.gen_min, "gen_max": q.gen_max, "policy_versions": sorted(q.policy_versions),
                      "root": q.root},
        }


class LineageCache:
    """One :class:`RunLineage` per run, rebuilt when the run's stamp (counts, last ids) changes,
    and the last few tree selections of each (a page reopened or polled costs a lookup)."""

    SELECTIONS = 16

    def __init__(self, db: ReadOnlyDB) -> None:
        self.db = db
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[tuple[Any, ...], RunLineage]] = {}  # run id -> (stamp, lineage)
        self._selections: dict[tuple[Any, ...], dict[str, Any]] = {}  # (run, stamp, query) -> payload

    def _stamp(self, run_id: str) -> tuple[Any, ...]:
        st = Q.run_stamp(self.db, run_id)
        return (st["programs"], st["last_seq"], st["evaluations"], st["last_evaluation"])

    def get(self, run_id: str, stamp: tuple[Any, ...] | None = None) -> RunLineage:
        """The run's lineage now: cached, extended by what was written since, or built."""
        key = stamp if stamp is not None else self._stamp(run_id)
        with self._lock:
            hit = self._entries.get(run_id)
            if hit is not None and hit[0] == key:
                return hit[1]
            lineage = None
            if hit is not None and _grew(hit[0], key):
                (n0, s0, e0, l0), old = hit
                delta = Q.lineage_rows(self.db, run_id, after_seq=s0 or 0, after_evaluation=l0 or 0)
                if len(delta["id"]) == key[0] - n0 and delta["n_evaluations"] == key[2] - e0:
                    lineage = old.extended(delta)  # only appends since: extend
            if lineage is None:
                lineage = RunLineage.from_rows(Q.lineage_rows(self.db, run_id))
            self._entries[run_id] = (key, lineage)
            return lineage

    def select(self, run_id: str, q: TreeQuery) -> dict[str, Any]:
        """``RunLineage.select(q)`` of the run as it is now, cached until the run changes."""
        stamp = self._stamp(run_id)
        key = (run_id, stamp, q)
        hit = self._selections.get(key)
        if hit is not None:
            return hit
        lineage = self.get(run_id, stamp)
        if q.root is not None and q.root not in lineage.index:
            q = TreeQuery(**{**q.__dict__, "root": Q.resolve_program(self.db, q.root)})
        out = lineage.select(q)
        with self._lock:
            if len(self._selections) >= self.SELECTIONS:
                self._selections.pop(next(iter(self._selections)))
            self._selections[key] = out
        return out


def _grew(old: tuple[Any, ...], new: tuple[Any, ...]) -> bool:
    """Whether two stamps ``(programs, last_seq, evaluations, last_eval)`` can differ by appends
    only (the caller then checks the rows read since against the counts)."""
    (n0, s0, e0, l0), (n1, s1, e1, l1) = old, new
    return (s0 is not None and s1 is not None and s1 >= s0 and n1 >= n0 and e1 >= e0
            and (l0 is None or (l1 is not None and l1 >= l0)))
