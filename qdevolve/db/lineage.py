"""Lineage views of a run: the networkx graph, ancestry, descendants, best path, exports.

Ancestry and descendants are recursive CTEs over ``edges`` evaluated by the database, so
they touch only the programs they return, never the whole run. Genealogy follows the
``mutation``, ``crossover`` and ``migration`` roles; ``inspiration`` edges (programs shown
in a prompt) are drawn in the run graph but are not parents.

Every node carries ``id``, ``run_id``, ``generation``, ``island``, ``operator``,
``policy_version``, ``status`` and ``score`` (the latest evaluation; ``None`` when the
program was never evaluated). Ancestry/descendant nodes add ``depth`` and ``parent_ids``.
"""

from __future__ import annotations

import json
import math
from collections import deque
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import bindparam, text

from qdevolve.db import _queries
from qdevolve.db._xmltext import EXPORT_FORMATS, NO_POLICY, _xml
from qdevolve.db.store import LineageStore
from qdevolve.errors import DatabaseError
from qdevolve.textsafe import dot_escape

if TYPE_CHECKING:
    import networkx as nx

__all__ = ["GENEALOGY", "NO_POLICY", "EXPORT_FORMATS", "run_graph", "ancestry", "descendants", "best_path",
           "best_program_id", "children", "roots", "nodes", "export", "write_graphml", "write_dot",
           "node_link", "parent_ids"]

GENEALOGY = ("mutation", "crossover", "migration")
_CHUNK = 500
_NODE_TYPES = {"score": "double", "policy_version": "long", "generation": "long",
               "island": "long", "status": "string", "operator": "string"}
_NOT_INSPIRATION = "e.role <> 'inspiration'"

# The latest evaluation of program p (evaluations are append-only; the highest id wins).
_LATEST = "ev.id = (SELECT MAX(e2.id) FROM evaluations e2 WHERE e2.program_id = p.id)"
_NODE_COLS = ("p.id, p.run_id, p.generation, p.island, p.operator, p.policy_version, "
              "ev.status, ev.score")


def _node(row: Sequence[Any]) -> dict[str, Any]:
    pid, run_id, gen, island, op, pv, status, score = row
    return {"id": pid, "run_id": run_id, "generation": gen, "island": island, "operator": op,
            "policy_version": pv, "status": status, "score": score}


def nodes(store: LineageStore, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Node attributes (with the latest evaluation) of the given program ids."""
    out: dict[str, dict[str, Any]] = {}
    q = text(f"SELECT {_NODE_COLS} FROM programs p LEFT JOIN evaluations ev ON {_LATEST} "
             "WHERE p.id IN :ids").bindparams(bindparam("ids", expanding=True))
    ids = list(ids)
    with store._connect() as c:
        for i in range(0, len(ids), _CHUNK):
            for row in c.execute(q, {"ids": ids[i:i + _CHUNK]}):
                out[row[0]] = _node(row)
    return out


def _resolve(store: LineageStore, program_id: str) -> str:
    return store.resolve_program_id(program_id)


# -- the whole run ---------------------------------------------------------------------------
def run_graph(store: LineageStore, run_id: str | None = None) -> nx.DiGraph:
    """The DiGraph of a run: one node per program, one edge per parent link (attribute
    ``role``, plus ``position`` among the child's parents). Three streaming queries."""
    rid = store.resolve_run(run_id)
    import networkx as nx  # imported when a graph is built (the CLI's views need none)

    g = nx.DiGraph(run_id=rid)
    with store._connect() as c:
        evals = {r[0]: (r[1], r[2]) for r in c.execute(text(
            "SELECT program_id, status, score FROM evaluations WHERE run_id = :r ORDER BY id"),
            {"r": rid})}
        none = (None, None)
        g.add_nodes_from(
            (pid, {"id": pid, "run_id": rid, "generation": gen, "island": isl, "operator": op,
                   "policy_version": pv, "status": evals.get(pid, none)[0],
                   "score": evals.get(pid, none)[1]})
            for pid, gen, isl, op, pv in c.execute(text(
                "SELECT id, generation, island, operator, policy_version FROM programs "
                "WHERE run_id = :r ORDER BY seq"), {"r": rid}))
        node_set = g._node
        g.add_edges_from(
            (parent, child, {"role": role, "position": pos})
            for parent, child, role, pos in c.execute(text(
                "SELECT parent_id, child_id, role, position FROM edges WHERE run_id = :r"),
                {"r": rid})
            if parent in node_set and child in node_set)
    return g


def parent_ids(graph: nx.DiGraph, node: str) -> list[str]:
    """Genealogical parents of ``node`` in ``graph``, in order (no inspirations)."""
    preds = [(d.get("position", 0), p) for p, d in graph._pred[node].items()
             if d.get("role") != "inspiration"]
    return [p for _, p in sorted(preds)]


# -- recursive queries -----------------------------------------------------------------------
def _walk(c: Any, q: Any, params: dict[str, Any]) -> list[Any]:
    """Run a recursive CTE. On PostgreSQL the walk is pinned to index nested loops: without
    fresh statistics (a table just filled, before autovacuum's ANALYZE) the planner picks a
    hash join that rescans all of ``edges`` on every level (seconds for a 5,000-deep chain)."""
    if c.dialect.name == "postgresql":
        for knob in ("enable_seqscan", "enable_hashjoin", "enable_mergejoin"):
            c.exec_driver_sql(f"SET LOCAL {knob} = off")
    return c.execute(q, params).all()


def _with_depths(root: str, edges: Iterable[tuple[str, str]]) -> dict[str, int]:
    """Shortest distance from ``root`` over ``(from, to)`` edges (BFS)."""
    adj: dict[str, list[str]] = {}
    for a, b in edges:
        adj.setdefault(a, []).append(b)
    depth = {root: 0}
    todo = deque([root])
    while todo:
        n = todo.popleft()
        for m in adj.get(n, ()):
            if m not in depth:
                depth[m] = depth[n] + 1
                todo.append(m)
    return depth


def _sorted_rows(store: LineageStore, depth: dict[str, int],
                 parents: dict[str, list[str]]) -> list[dict[str, Any]]:
    attrs = nodes(store, list(depth))
    rows = []
    for pid, d in depth.items():
        row = attrs.get(pid)
        if row is None:  # an edge to a program that was never stored (foreign keys off)
            continue
        row["depth"] = d
        row["parent_ids"] = parents.get(pid, [])
        rows.append(row)
    rows.sort(key=lambda r: (r["depth"], r["generation"], r["id"]))
    return rows


_UP = f"""
    WITH RECURSIVE up(child_id, parent_id, position) AS (
        SELECT e.child_id, e.parent_id, e.position FROM edges e
        WHERE e.child_id = :pid AND {_NOT_INSPIRATION}
        UNION
        SELECT e.child_id, e.parent_id, e.position FROM edges e
        JOIN up ON e.child_id = up.parent_id WHERE {_NOT_INSPIRATION}
    )"""


def ancestry(store: LineageStore, program_id: str) -> list[dict[str, Any]]:
    """The program (depth 0) and every ancestor, nearest first.

    One query: a recursive CTE walks ``edges`` upwards from the program and each link is
    joined to its parent's row; ``depth`` is the shortest number of parent links (BFS over
    the links returned). Accepts a unique id prefix.
    """
    pid = _resolve(store, program_id)
    with store._connect() as c:
        found = _walk(c, text(
            f"{_UP} SELECT up.child_id, up.position, {_NODE_COLS} FROM up "
            f"JOIN programs p ON p.id = up.parent_id LEFT JOIN evaluations ev ON {_LATEST} "
            f"UNION ALL SELECT NULL, 0, {_NODE_COLS} FROM programs p "
            f"LEFT JOIN evaluations ev ON {_LATEST} WHERE p.id = :pid"), {"pid": pid})
    attrs: dict[str, Sequence[Any]] = {}
    parents: dict[str, list[tuple[int, str]]] = {}
    links = []
    for row in found:
        node = row[2]
        attrs[node] = row[2:]
        if row[0] is not None:
            parents.setdefault(row[0], []).append((row[1], node))
            links.append((row[0], node))
    depth = _with_depths(pid, links)
    out = []
    for node, d in depth.items():  # breadth-first: depths never decrease
        item = _node(attrs[node])
        item["depth"] = d
        ps = parents.get(node)
        item["parent_ids"] = [] if not ps else [ps[0][1]] if len(ps) == 1 else [q for _, q in sorted(ps)]
        out.append(item)
    return out


def descendants(store: LineageStore, program_id: str,
                max_depth: int | None = None) -> list[dict[str, Any]]:
    """The program (depth 0) and every descendant within ``max_depth`` links, nearest first."""
    pid = _resolve(store, program_id)
    if max_depth is not None and max_depth < 0:
        raise ValueError(f"max_depth must be >= 0, got {max_depth}")
    if max_depth is None:
        q = text(f"""
            WITH RECURSIVE down(parent_id, child_id) AS (
                SELECT e.parent_id, e.child_id FROM edges e
                WHERE e.parent_id = :pid AND {_NOT_INSPIRATION}
                UNION
                SELECT e.parent_id, e.child_id FROM edges e
                JOIN down ON e.parent_id = down.child_id WHERE {_NOT_INSPIRATION}
            )
            SELECT parent_id, child_id FROM down""")
        params: dict[str, Any] = {"pid": pid}
    else:
        q = text(f"""
            WITH RECURSIVE down(parent_id, child_id, depth) AS (
                SELECT e.parent_id, e.child_id, 1 FROM edges e
                WHERE e.parent_id = :pid AND {_NOT_INSPIRATION} AND :maxd >= 1
                UNION
                SELECT e.parent_id, e.child_id, down.depth + 1 FROM edges e
                JOIN down ON e.parent_id = down.child_id
                WHERE {_NOT_INSPIRATION} AND down.depth < :maxd
            )
            SELECT DISTINCT parent_id, child_id FROM down""")
        params = {"pid": pid, "maxd": max_depth}
    with store._connect() as c:
        rows = _walk(c, q, params)
        depth = _with_depths(pid, ((a, b) for a, b in rows))
        parents = _queries.parents_of(c, list(depth))
    return _sorted_rows(store, depth, parents)


def best_program_id(store: LineageStore, run_id: str | None = None) -> str:
    """The run's best ``ok`` program (highest score; the earliest on ties)."""
    rid = store.resolve_run(run_id)
    with store._connect() as c:
        pid = c.execute(text(
            "SELECT program_id FROM evaluations WHERE run_id = :r AND status = 'ok' "
            "AND score IS NOT NULL ORDER BY score DESC, id ASC LIMIT 1"), {"r": rid}).scalar()
    if pid is None:
        raise DatabaseError(f"{store.name}: run {rid} has no successfully evaluated program yet")
    return pid


def best_path(store: LineageStore, run_id: str | None = None) -> list[dict[str, Any]]:
    """Seed -> best program, following each program's first parent."""
    best = best_program_id(store, run_id)
    by_id = {row["id"]: row for row in ancestry(store, best)}
    path, cur, seen = [], best, set()
    while cur is not None and cur in by_id and cur not in seen:
        seen.add(cur)
        path.append(by_id[cur])
        ps = by_id[cur]["parent_ids"]
        cur = ps[0] if ps else None
    return path[::-1]


# -- bounded views for the tree command -----------------------------------------------------
def roots(store: LineageStore, run_id: str, limit: int) -> tuple[list[dict[str, Any]], int]:
    """Up to ``limit`` programs of the run without parents (seeds), best first, and how many
    there are in all."""
    base = (f"FROM programs p WHERE p.run_id = :r AND NOT EXISTS (SELECT 1 FROM edges e "
            f"WHERE e.child_id = p.id AND {_NOT_INSPIRATION})")
    with store._connect() as c:
        total = c.execute(text(f"SELECT COUNT(*) {base}"), {"r": run_id}).scalar() or 0
        rows = c.execute(text(
            f"SELECT {_NODE_COLS} FROM programs p LEFT JOIN evaluations ev ON {_LATEST} "
            f"WHERE p.id IN (SELECT p.id {base}) "
            "ORDER BY (ev.score IS NULL), ev.score DESC, p.seq LIMIT :k"),
            {"r": run_id, "k": limit}).all()
    return [_node(r) for r in rows], total


def children(store: LineageStore, program_id: str, limit: int) -> tuple[list[dict[str, Any]], int]:
    """Up to ``limit`` children of a program, best score first, and how many it has."""
    with store._connect() as c:
        total = c.execute(text(
            f"SELECT COUNT(DISTINCT e.child_id) FROM edges e WHERE e.parent_id = :pid "
            f"AND {_NOT_INSPIRATION}"), {"pid": program_id}).scalar() or 0
        rows = c.execute(text(
            f"SELECT {_NODE_COLS} FROM programs p LEFT JOIN evaluations ev ON {_LATEST} "
            f"WHERE p.id IN (SELECT e.child_id FROM edges e WHERE e.parent_id = :pid "
            f"AND {_NOT_INSPIRATION}) ORDER BY (ev.score IS NULL), ev.score DESC, p.seq LIMIT :k"),
            {"pid": program_id, "k": limit}).all()
    return [_node(r) for r in rows], total


# -- exports ---------------------------------------------------------------------------------
def node_link(graph: nx.DiGraph) -> dict[str, Any]:
    """networkx node-link data (``nodes``/``edges`` keys); every node gets ``parent_ids``."""
    import networkx as nx

    data = nx.node_link_data(graph, edges="edges")
    for node in data["nodes"]:
        node["parent_ids"] = parent_ids(graph, node["id"])
        for k, v in node.items():
            if isinstance(v, float) and not math.isfinite(v):
                node[k] = None
    return data


def _graphml_types(items: Iterable[dict[str, Any]]) -> dict[str, str]:
    types: dict[str, str] = {}
    rank = {"boolean": 0, "long": 1, "double": 2, "string": 3}
    for attrs in items:
        for k, v in attrs.items():
            if v is None:
                t = types.get(k, "boolean")
                types.setdefault(k, t)
                continue
            if isinstance(v, bool):
                t = "boolean"
            elif isinstance(v, int):
                t = "long"
            elif isinstance(v, float):
                t = "double"
            else:
                t = "string"
            old = types.get(k)
            types[k] = t if old is None or rank[t] > rank[old] else old
    return types


def _graphml_value(v: Any, t: str) -> str | None:
    if v is None:
        return {"long": str(NO_POLICY), "double": "NaN"}.get(t)  # strings/booleans: omitted
    if t == "boolean":
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return " ".join(map(str, v))
    return _xml(v)


def write_graphml(graph: nx.DiGraph, path: str | Path) -> None:
    """GraphML readable by ``networkx.read_graphml`` (streamed; no lxml needed).

    ``None`` becomes ``NaN`` for doubles (``score``) and :data:`NO_POLICY` for integers
    (``policy_version``); missing strings are omitted; ``parent_ids`` is space-separated.
    """
    node_attrs = ({**d, "parent_ids": parent_ids(graph, n)} for n, d in graph.nodes(data=True))
    ntypes = _graphml_types({**d, "parent_ids": ""} for _, d in graph.nodes(data=True))
    for k, t in _NODE_TYPES.items():  # fixed types, even when every value is None
        if k in ntypes:
            ntypes[k] = t
    etypes = _graphml_types(d for _, _, d in graph.edges(data=True))
    gtypes = _graphml_types([graph.graph])
    keys: dict[tuple[str, str], str] = {}
    out = ["<?xml version='1.0' encoding='utf-8'?>\n",
           '<graphml xmlns="http://graphml.graphdrawing.org/xmlns" '
           'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
           'xsi:schemaLocation="http://graphml.graphdrawing.org/xmlns '
           'http://graphml.graphdrawing.org/xmlns/1.0/graphml.xsd">\n']
    for scope, types in (("graph", gtypes), ("node", ntypes), ("edge", etypes)):
        for name, t in types.items():
            kid = f"d{len(keys)}"
            keys[(scope, name)] = kid
            out.append(f'<key id="{kid}" for="{scope}" attr.name="{_xml(name)}" attr.type="{t}"/>\n')
    out.append('<graph edgedefault="directed">\n')
    for name, v in graph.graph.items():
        s = _graphml_value(v, gtypes[name])
        if s is not None:
            out.append(f'<data key="{keys[("graph", name)]}">{s}</data>\n')
    nkeys = [(name, keys[("node", name)], t) for name, t in ntypes.items()]
    for n, attrs in zip(graph.nodes, node_attrs, strict=True):
        parts = [f'<node id="{_xml(n)}">']
        for name, kid, t in nkeys:
            s = _graphml_value(attrs.get(name), t)
            if s is not None:
                parts.append(f'<data key="{kid}">{s}</data>')
        parts.append("</node>\n")
        out.append("".join(parts))
    ekeys = [(name, keys[("edge", name)], t) for name, t in etypes.items()]
    for a, b, attrs in graph.edges(data=True):
        parts = [f'<edge source="{_xml(a)}" target="{_xml(b)}">']
        for name, kid, t in ekeys:
            s = _graphml_value(attrs.get(name), t)
            if s is not None:
                parts.append(f'<data key="{kid}">{s}</data>')
        parts.append("</edge>\n")
        out.append("".join(parts))
    out.append("</graph>\n</graphml>\n")
    Path(path).write_text("".join(out), encoding="utf-8")


def _dot_str(v: Any) -> str:
    """A double-quoted DOT string: control characters visible, quotes and backslashes escaped,
    so stored text can never close the string and add nodes or edges to the graph."""
    return '"' + dot_escape(v) + '"'


def _dot_key(k: Any) -> str:
    """An attribute name: bare when it is a plain identifier, else a quoted string."""
    return k if isinstance(k, str) and k.isidentifier() and k.isascii() else _dot_str(k)


def _dot_label(node_id: Any, score: Any, operator: Any) -> str:
    shown = "-" if score is None else f"{score:.4g}"
    return f'"{dot_escape(str(node_id)[:8])}\\n{dot_escape(shown)} {dot_escape(operator or "")}"'


def write_dot(graph: nx.DiGraph, path: str | Path) -> None:
    """Graphviz DOT (``dot -Tsvg``); nodes labelled with short id, score and operator."""
    out = ["digraph lineage {\n", "  node [shape=box, fontname=monospace];\n"]
    for name, v in graph.graph.items():
        out.append(f"  {_dot_key(name)}={_dot_str(v)};\n")
    for n, d in graph.nodes(data=True):
        attrs = [f"label={_dot_label(n, d.get('score'), d.get('operator'))}"]
        for k, v in d.items():
            if k in ("id",) or v is None:
                continue
            attrs.append(f"{_dot_key(k)}={_dot_str(v)}")
        out.append(f"  {_dot_str(n)} [{', '.join(attrs)}];\n")
    for a, b, d in graph.edges(data=True):
        style = ", style=dashed" if d.get("role") == "inspiration" else ""
        out.append(f"  {_dot_str(a)} -> {_dot_str(b)} [role={_dot_str(d.get('role', ''))}{style}];\n")
    out.append("}\n")
    Path(path).write_text("".join(out), encoding="utf-8")


def export(graph: nx.DiGraph, path: str | Path, format: str = "graphml") -> Path:
    """Write ``graph`` as ``graphml``, ``json`` (node-link) or ``dot``; returns the path."""
    p = Path(path)
    if format not in EXPORT_FORMATS:
        raise ValueError(f"unknown export format {format!r}; use one of {', '.join(EXPORT_FORMATS)}")
    if format == "graphml":
        write_graphml(graph, p)
    elif format == "dot":
        write_dot(graph, p)
    else:
        p.write_text(json.dumps(node_link(graph), separators=(",", ":")), encoding="utf-8")
    return p
