"""A whole run's lineage tree in one pass: every program with its children, ranked.

Children are ranked as :func:`qdevolve.db.lineage.children` ranks them: best score first,
unevaluated last, then insertion order. Instead of sorting each parent's list, the whole run
is sorted once by score (a stable sort of programs already in insertion order) and each
program is then handed to its parents in that order, so every list comes out ranked. The
data come from three plain scans (:class:`~qdevolve.db._scans.RunRows`) joined by program id
with C-level ``dict``/``map`` passes, and the children are linked to their parents by one
sort of integer keys cut into lists by C passes (:func:`_link_ranked`); the only per-program
Python is the caller's payload (e.g. the line a tree view prints).
"""

from __future__ import annotations

import math
from bisect import insort
from collections import Counter, deque
from collections.abc import Callable, Sequence
from itertools import accumulate, compress, repeat
from operator import is_, is_not, itemgetter, setitem
from typing import TYPE_CHECKING, Any

from qdevolve.db._scans import RunRows, quiet_gc

if TYPE_CHECKING:
    from qdevolve.db.store import LineageStore

__all__ = ["COLUMNS", "TREE_KEYS", "Node", "run_tree", "rank_key"]

COLUMNS = "id, generation, operator, policy_version, island"  # payload rows: (seq, <COLUMNS>)
TREE_KEYS = ("id", "generation", "operator", "policy_version", "status", "score", "island")  # a view's node tuple
_INF = float("inf")

# A node: [payload, children (list of nodes, ranked) or None, hidden children, program id].
# "Hidden" counts children known to exist but not listed (a view fetched only the top K).
Node = list

Payloads = Callable[[list[tuple[Any, ...]], list[tuple[Any, ...]]], Sequence[Any]]


def rank_key(score: Any) -> tuple[bool, Any]:
    """The children order of :func:`qdevolve.db.lineage.children` as a sort key."""
    return (score is None, -score if score is not None else 0.0)


def run_tree(store: LineageStore, run_id: str, payloads: Payloads, *,
             index: bool = True) -> tuple[list[Node], dict[str, Node]]:
    """Every program of the run as a :data:`Node`, linked to its ranked children.

    Args:
        payloads: called with each page of the run's program rows (``(seq, <COLUMNS>)``, in
            insertion order) and the matching latest-evaluation rows ``(program_id, status,
            score)`` (``(None, None, None)`` when unevaluated); returns one payload per row.
        index: False: the caller needs the roots only (the id -> node map comes back empty).

    Returns:
        ``(roots, nodes)``: the programs without parents, ranked, and program id -> node.
    """
    src = RunRows(store, run_id)
    with quiet_gc():
        single, multi = src.parents()
        pids: list[str] = []
        nodes: list[Node] = []
        scores: list[Any] = []
        for rows, ids, evs in src.joined_pages(COLUMNS):  # a page at a time: rows never held whole
            found = payloads(rows, evs)
            if len(found) != len(ids):
                raise ValueError(f"payloads gave {len(found)} payloads for {len(ids)} rows")
            nodes += map(list, zip(found, repeat(None), repeat(0), ids))
            pids += ids
            scores += map(itemgetter(2), evs)
        order = _score_order(scores)
        if order is not None:
            ranked = _link_ranked(order, pids, nodes, single, multi)
            return ranked, dict(zip(pids, nodes, strict=True)) if index else {}
        by_id = dict(zip(pids, nodes, strict=True))
        # a NaN or -inf score: link in insertion order, then sort each list as the per-parent query
        parents: dict[str, Any] = {**single, **multi} if multi else single
        roots: list[Node] = []
        _link(nodes, map(parents.get, pids), by_id, roots)
        score_of = dict(zip(pids, scores, strict=True))
        key = lambda n: rank_key(score_of[n[3]])  # noqa: E731
        roots.sort(key=key)
        for n in nodes:
            if n[1] is not None and len(n[1]) > 1:
                n[1].sort(key=key)
    return roots, by_id


def _link_ranked(order: list[int], pids: list[str], nodes: list[Node], single: dict[str, str],
                 multi: dict[str, tuple[str, ...]]) -> list[Node]:
    """Set every node's children, ranked, and return the roots, ranked; ``order``: the
    program indices best first. The children with one parent in the run, taken best first,
    are sorted (stably) by their parent's index: each parent's children then lie together,
    ranked, and C passes cut them into the lists. A child with several parents is inserted
    into each list at its rank (a Python loop over those children only). A parent outside
    the run keeps no node; a parent named twice, once."""
    n = len(pids)
    pos = dict(zip(pids, range(n), strict=True))
    par = list(map(single.get, pids))  # probed in insertion order: the ids lie in memory that way
    up = list(map(pos.get, par))  # parent index; None: a root, several parents or one outside the run
    is_root = list(map(is_, par, repeat(None)))
    below = sorted(compress(order, map(is_not, map(up.__getitem__, order), repeat(None))), key=up.__getitem__)
    kids = list(map(nodes.__getitem__, below))
    counts = Counter(map(up.__getitem__, below))  # parent index -> children, ascending
    ends = list(accumulate(counts.values()))
    deque(map(setitem, map(nodes.__getitem__, counts), repeat(1),
              map(kids.__getitem__, map(slice, [0, *ends[:-1]], ends))), maxlen=0)
    if multi:
        rank_of = [0] * n
        deque(map(setitem, repeat(rank_of), order, range(n)), maxlen=0)
        rank = lambda node: rank_of[pos[node[3]]]  # noqa: E731
        for child, ps in multi.items():
            c = pos.get(child)
            if c is None:
                continue
            is_root[c] = False
            for p in map(pos.get, dict.fromkeys(ps)):
                if p is not None:
                    if nodes[p][1] is None:
                        nodes[p][1] = [nodes[c]]
                    else:
                        insort(nodes[p][1], nodes[c], key=rank)
    return list(map(nodes.__getitem__, compress(order, map(is_root.__getitem__, order))))


def _score_order(scores: list[Any]) -> list[int] | None:
    """Program indices best score first, unevaluated last, ties in insertion order; None
    when a score is NaN or -inf (no single float key then matches :func:`rank_key`)."""
    keys = [_INF if s is None else -s for s in scores]
    try:
        if keys.count(_INF) != scores.count(None) or any(map(math.isnan, keys)):
            return None
    except (TypeError, OverflowError):
        return None
    return sorted(range(len(keys)), key=keys.__getitem__)


def _link(nodes: Any, parents: Any, by_id: dict[str, Node], roots: list[Node]) -> None:
    """Append each node to the children of each of its parents (or to ``roots``), in the
    order given. A parent outside the run keeps no node; a parent named twice, once."""
    get = by_id.get
    for node, p in zip(nodes, parents, strict=True):
        up = get(p)
        if up is not None:
            kids = up[1]
            if kids is None:
                up[1] = [node]
            else:
                kids.append(node)
        elif p is None:
            roots.append(node)
        elif type(p) is tuple:
            for q in dict.fromkeys(p):
                up = get(q)
                if up is not None:
                    if up[1] is None:
                        up[1] = [node]
                    else:
                        up[1].append(node)
