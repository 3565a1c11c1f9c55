"""The streamed lineage exports: GraphML, node-link JSON or DOT of a whole run.

:func:`export_run` writes from three plain scans of the run joined by program id
(:mod:`qdevolve.db._scans`), one format string per node and edge when nothing needs escaping,
without building a networkx graph or holding the file. Its output equals
:func:`qdevolve.db.lineage.export` of :func:`qdevolve.db.lineage.run_graph` for every format
(same attributes, same escaping). It needs no SQLAlchemy: ``store`` may be a
:class:`~qdevolve.db._view.SqliteView`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from itertools import repeat
from operator import itemgetter
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from qdevolve.db._scans import RunRows as _RunRows
from qdevolve.db._scans import genealogy, quiet_gc
from qdevolve.db._xmltext import EXPORT_FORMATS, NO_POLICY, _xml

if TYPE_CHECKING:
    from qdevolve.db.store import LineageStore

__all__ = ["export_run"]

_XML_SPECIAL = re.compile("[&<>\"\x00-\x1f\ufffe\uffff]")  # what _xml rewrites

def export_run(store: LineageStore, run_id: str | None, path: str | Path,
               format: str = "graphml") -> tuple[int, int]:
    """Write a run's lineage graph as ``graphml``, ``json`` or ``dot``, streamed.

    Returns:
        ``(programs, edges)`` written.
    """
    if format not in EXPORT_FORMATS:
        raise ValueError(f"unknown export format {format!r}; use one of {', '.join(EXPORT_FORMATS)}")
    rid = store.resolve_run(run_id)
    writer = {"graphml": _GraphML, "json": _NodeLink, "dot": _Dot}[format]
    source = _RunRows(store, rid)
    ids: set[str] = set()  # the run's program ids: an edge is written when both ends are
    with Path(path).open("w", encoding="utf-8") as fh, quiet_gc():
        w = writer(fh, rid)
        n_nodes = 0
        if isinstance(w, _GraphML):
            edges = source.edge_rows()  # read once: the parents and the edges written below
            single, multi = genealogy(edges)
            parent_text = {**single, **{c: " ".join(ps) for c, ps in multi.items()}} if multi else single
            del single
            for rows, pids, evs in source.joined_pages("id, generation, island, operator, policy_version"):
                w.page(rows, pids, evs, list(map(parent_text.get, pids, repeat(""))))
                ids.update(pids)
                n_nodes += len(rows)
            del parent_text
            chunks: Any = [edges]
        else:
            for page in source.pages():
                for node in page:
                    w.node(node)
                    ids.add(node["id"])
                n_nodes += len(page)
            chunks = source.edges()
        w.between()
        n_edges = 0
        for chunk in chunks:
            if not (ids.issuperset(map(itemgetter(0), chunk)) and ids.issuperset(map(itemgetter(1), chunk))):
                chunk = [e for e in chunk if e[0] in ids and e[1] in ids]
            for i in range(0, len(chunk), _EDGE_PAGE):
                if isinstance(w, _GraphML):
                    w.edge_page(chunk[i:i + _EDGE_PAGE])
                else:
                    for edge in chunk[i:i + _EDGE_PAGE]:
                        w.edge(*edge)
            n_edges += len(chunk)
        w.end()
    return n_nodes, n_edges


_EDGE_PAGE = 20000  # edges formatted into one string at a time


def _plain(values: Sequence[Any]) -> bool:
    """Every value a string that XML takes as it is (no escaping, no replacement)."""
    if not set(map(type, values)) <= _STR:
        return False
    text_ = "".join(values)
    if text_.isascii():  # the common case, checked at C speed: no markup, no control byte
        raw = text_.encode("ascii")
        return len(raw.translate(None, _XML_SPECIAL_ASCII)) == len(raw)
    return not _XML_SPECIAL.search(text_)


_XML_SPECIAL_ASCII = b'&<>"' + bytes(range(32))  # _XML_SPECIAL within ASCII


_STR, _INT, _INT_OR_NONE = {str}, {int}, {int, type(None)}
_NUMBER_OR_NONE = {float, int, type(None)}


class _GraphML:
    """GraphML with the key types :func:`qdevolve.db.lineage.write_graphml` gives a run graph."""

    NODE = (("id", "string"), ("run_id", "string"), ("generation", "long"), ("island", "long"),
            ("operator", "string"), ("policy_version", "long"), ("status", "string"),
            ("score", "double"), ("parent_ids", "string"))
    EDGE = (("role", "string"), ("position", "long"))

    def __init__(self, fh: IO[str], run_id: str) -> None:
        self.fh, self.xml = fh, _xml
        fh.write("<?xml version='1.0' encoding='utf-8'?>\n"
                 '<graphml xmlns="http://graphml.graphdrawing.org/xmlns" '
                 'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
                 'xsi:schemaLocation="http://graphml.graphdrawing.org/xmlns '
                 'http://graphml.graphdrawing.org/xmlns/1.0/graphml.xsd">\n'
                 '<key id="d0" for="graph" attr.name="run_id" attr.type="string"/>\n')
        for i, (name, t) in enumerate(self.NODE):
            fh.write(f'<key id="n{i}" for="node" attr.name="{name}" attr.type="{t}"/>\n')
        for i, (name, t) in enumerate(self.EDGE):
            fh.write(f'<key id="e{i}" for="edge" attr.name="{name}" attr.type="{t}"/>\n')
        fh.write(f'<graph edgedefault="directed">\n<data key="d0">{_xml(run_id)}</data>\n')
        self.run_id, self.run_text = run_id, f'<data key="n1">{_xml(run_id)}</data>'

    def node(self, n: dict[str, Any]) -> None:
        text_ = self.text
        parts = [f'<node id="{text_(n["id"])}">']
        for i, (name, t) in enumerate(self.NODE):
            v = n[name]
            if name == "parent_ids":
                v = text_(" ".join(v))
            elif v is None:
                v = {"long": NO_POLICY, "double": "NaN"}.get(t)
                if v is None:
                    continue
            elif isinstance(v, str):
                v = text_(v)
            parts.append(f'<data key="n{i}">{v}</data>')
        parts.append("</node>\n")
        self.fh.write("".join(parts))

    def text(self, s: str) -> str:
        """XML-escaped text; plain strings (hex ids, operator names) skip the escaping."""
        return self.xml(s) if _XML_SPECIAL.search(s) else s

    def page(self, rows: list[tuple[Any, ...]], pids: list[str], evs: list[tuple[Any, ...]],
             parents: list[str]) -> None:
        """Node lines for ``(seq, id, generation, island, operator, policy_version)`` rows with
        their latest evaluations and parent texts: one format string per node when the page
        needs no escaping (checked once per column), else :meth:`node` per node."""
        _seqs, _ids, gens, isls, ops, pvs = zip(*rows, strict=True)
        statuses = set(map(itemgetter(1), evs))
        if not (_plain(pids) and _plain(ops) and _plain(parents) and set(map(type, gens)) <= _INT
                and set(map(type, isls)) <= _INT and set(map(type, pvs)) <= _INT_OR_NONE
                and set(map(type, map(itemgetter(2), evs))) <= _NUMBER_OR_NONE
                and _plain([s for s in statuses if s is not None])):
            for (_seq, pid, gen, isl, op, pv), (_p, status, score), plist in zip(rows, evs, parents, strict=True):
                self.node({"id": pid, "run_id": self.run_id, "generation": gen, "island": isl, "operator": op,
                           "policy_version": pv, "status": status, "score": score,
                           "parent_ids": plist.split(" ") if plist else []})
            return
        # The page as one string from interleaved columns: C loops place the pieces, Python
        # only renders the numbers (a float's repr is the one per-node cost left).
        n = len(rows)
        mid = {s: "</data>" + ("" if s is None else f'<data key="n6">{s}</data>') + '<data key="n7">'
               for s in statuses}
        parts: list[Any] = [None] * (13 * n)
        parts[0::13] = ['<node id="'] * n
        parts[1::13] = pids
        parts[2::13] = ['"><data key="n0">'] * n
        parts[3::13] = pids
        parts[4::13] = [f'</data>{self.run_text}<data key="n2">'] * n
        parts[5::13] = map(str, gens)
        parts[6::13] = ['</data><data key="n3">'] * n
        parts[7::13] = map(str, isls)
        parts[8::13] = ['</data><data key="n4">'] * n
        parts[9::13] = ops
        parts[10::13] = [f'</data><data key="n5">{NO_POLICY if pv is None else pv}' for pv in pvs]
        parts[11::13] = [f'{mid[ev[1]]}{"NaN" if ev[2] is None else ev[2]}</data><data key="n8">' for ev in evs]
        parts[12::13] = [f"{p}</data></node>\n" for p in parents]
        self.fh.write("".join(parts))

    def edge_page(self, edges: list[tuple[str, str, str, int]]) -> None:
        if not edges:
            return
        a, b, roles, positions = zip(*edges, strict=True)
        if not (_plain(a) and _plain(b) and _plain(list(set(roles))) and set(map(type, positions)) <= _INT):
            for edge in edges:
                self.edge(*edge)
            return
        n = len(edges)
        parts: list[Any] = ['<edge source="', None, '" target="', None, '"><data key="e0">', None,
                            '</data><data key="e1">', None, "</data></edge>\n"] * n
        parts[1::9], parts[3::9], parts[5::9], parts[7::9] = a, b, roles, map(str, positions)
        self.fh.write("".join(parts))

    def between(self) -> None:
        pass

    def edge(self, a: str, b: str, role: str, position: int) -> None:
        t = self.text
        self.fh.write(f'<edge source="{t(a)}" target="{t(b)}"><data key="e0">{t(role)}</data>'
                      f'<data key="e1">{int(position or 0)}</data></edge>\n')

    def end(self) -> None:
        self.fh.write("</graph>\n</graphml>\n")


class _NodeLink:
    """networkx node-link JSON (``nodes``/``edges``), ASCII-escaped, non-finite numbers null."""

    def __init__(self, fh: IO[str], run_id: str) -> None:
        self.fh, self.first = fh, True
        fh.write('{"directed":true,"multigraph":false,"graph":' + json.dumps({"run_id": run_id})
                 + ',"nodes":[')

    def node(self, n: dict[str, Any]) -> None:
        if isinstance(n["score"], float) and not math.isfinite(n["score"]):
            n = {**n, "score": None}
        self.fh.write(("" if self.first else ",") + json.dumps(n, separators=(",", ":")))
        self.first = False

    def between(self) -> None:
        self.fh.write('],"edges":[')
        self.first = True

    def edge(self, a: str, b: str, role: str, position: int) -> None:
        e = {"role": role, "position": position, "source": a, "target": b}
        self.fh.write(("" if self.first else ",") + json.dumps(e, separators=(",", ":")))
        self.first = False

    def end(self) -> None:
        self.fh.write("]}")


class _Dot:
    """Graphviz DOT; every string through :func:`qdevolve.textsafe.dot_escape`."""

    def __init__(self, fh: IO[str], run_id: str) -> None:
        from qdevolve.db.lineage import _dot_key, _dot_label, _dot_str

        self.fh, self.q, self.key, self.label = fh, _dot_str, _dot_key, _dot_label
        fh.write("digraph lineage {\n  node [shape=box, fontname=monospace];\n"
                 f"  run_id={_dot_str(run_id)};\n")

    def node(self, n: dict[str, Any]) -> None:
        q = self.q
        attrs = [f"label={self.label(n['id'], n['score'], n['operator'])}"]
        attrs += [f"{self.key(k)}={q(v)}" for k, v in n.items() if k not in ("id", "parent_ids") and v is not None]
        self.fh.write(f"  {q(n['id'])} [{', '.join(attrs)}];\n")

    def between(self) -> None:
        pass

    def edge(self, a: str, b: str, role: str, position: int) -> None:
        q = self.q
        style = ", style=dashed" if role == "inspiration" else ""
        self.fh.write(f"  {q(a)} -> {q(b)} [role={q(role)}{style}];\n")

    def end(self) -> None:
        self.fh.write("}\n")
