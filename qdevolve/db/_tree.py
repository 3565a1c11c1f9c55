"""A whole run's lineage tree in one pass: every program with its children, ranked.

Children are ranked as :func:`qdevolve.db.lineage.children` ranks them: best score first,
unevaluated last, then insertion order. Instead of sorting each parent's list, the whole run
is sorted once by score (a stable sort of programs already in insertion order) and each
program is then handed to its parents in that order, so every list comes out ranked. The
data come from three plain scans (:class:`~qdevolve.db._scans.RunRows`) joined by program id
with C-level ``dict``/``map`` passes; the only per-program Python is the caller's payload
(e.g. the line a tree view prints) and one loop that links children to parents (measured
faster on this machine than linking by sorts and C passes, each of which walks the run's
memory again).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from operator import itemgetter
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


def run_tree(store: LineageStore, run_id: str, payloads: Payloads,
             columns: str = COLUMNS) -> tuple[list[Node], dict[str, Node]]:
    """Every program of the run as a :data:`Node`, linked to its ranked children.

    Args:
        payloads: called with each page of the run's program rows (``(seq, <COLUMNS>)``, in
            insertion order) and the matching latest-evaluation rows ``(program_id, status,
            score)`` (``(None, None, None)`` when unevaluated); returns one payload per row.
        columns: :data:`COLUMNS` or the same with ``NULL`` for a column the payloads ignore
            (each column read costs an object per program).

    Returns:
        ``(roots, nodes)``: the programs without parents, ranked, and program id -> node.
    """
    src = RunRows(store, run_id)
    with quiet_gc():
        single, multi = src.parents()
        pids: list[str] = []
        nodes: list[Node] = []
        scores: list[Any] = []
        for rows, ids, evs in src.joined_pages(columns):  # a page at a time: rows never held whole
            nodes += [[p, None, 0, pid] for p, pid in zip(payloads(rows, evs), ids, strict=True)]
            pids += ids
            scores += map(itemgetter(2), evs)
        by_id = dict(zip(pids, nodes, strict=True))
        parents: dict[str, Any] = {**single, **multi} if multi else single
        del single, rows, ids, evs
        order = _score_order(scores)
        roots: list[Node] = []
        ranked = order is not None
        seq = order if ranked else range(len(nodes))
        par = list(map(parents.get, pids))  # probed in insertion order, as the ids lie in memory
        ups = list(map(by_id.get, par))
        _link(map(nodes.__getitem__, seq), map(par.__getitem__, seq), map(ups.__getitem__, seq), by_id, roots)
        if not ranked:  # a NaN or -inf score: sort each list exactly as the per-parent query
            score_of = dict(zip(pids, scores, strict=True))
            key = lambda n: rank_key(score_of[n[3]])  # noqa: E731
            roots.sort(key=key)
            for n in nodes:
                if n[1] is not None and len(n[1]) > 1:
                    n[1].sort(key=key)
    return roots, by_id


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


def _link(nodes: Any, parents: Any, ups: Any, by_id: dict[str, Node], roots: list[Node]) -> None:
    """Append each node to the children of each of its parents (or to ``roots``), in the
    order given; ``ups``: each parent's node (``by_id.get`` of the parent). A parent outside
    the run keeps no node; a parent named twice, once."""
    get = by_id.get
    for node, p, up in zip(nodes, parents, ups, strict=True):
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
