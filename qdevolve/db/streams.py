"""Whole-run views that stay cheap at 200,000 programs: streamed, aggregated in the database.

* :func:`export_run` writes GraphML, node-link JSON or DOT from three plain scans of the
  run joined by program id (:mod:`qdevolve.db._scans`), one format string per node and edge
  when nothing needs escaping, without building a networkx graph or holding the file.
* :func:`tree_children` and :func:`all_children` give every program's ranked children from
  one pass over the run (:mod:`qdevolve.db._tree`).
* :func:`children_of` fetches the top-K children of many parents in one query per 500
  parents (a window function ranks each parent's children), so ``lineage tree`` costs one
  query per level instead of two per node.
* :func:`replay_stream` yields the light ``(seq, Program, EvalResult)`` rows an archive
  replay needs: no code unless a code-based feature needs it, no metrics, no artifacts.

The output of :func:`export_run` equals :func:`qdevolve.db.lineage.export` of
:func:`qdevolve.db.lineage.run_graph` for every format (same attributes, same escaping).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Iterator, Sequence
from itertools import repeat
from operator import itemgetter
from pathlib import Path
from typing import IO, Any

from sqlalchemy import bindparam, text

from qdevolve.db._rows import known_status
from qdevolve.db._scans import NO_EVAL, quiet_gc
from qdevolve.db._scans import RunRows as _RunRows
from qdevolve.db._tree import run_tree
from qdevolve.db.store import LineageStore
from qdevolve.types import EvalResult, Program

__all__ = ["export_run", "children_of", "all_children", "tree_children", "replay_stream", "CODE_FEATURES",
           "TREE_KEYS"]

CODE_FEATURES = ("code_length", "complexity", "ast_complexity", "diversity", "code_diversity")  # built-ins computed from code
_PAGE = 5000
_CHUNK = 500
_GENEALOGY = "e.role <> 'inspiration'"
_LATEST = "ev.id = (SELECT MAX(e2.id) FROM evaluations e2 WHERE e2.program_id = p.id)"
_XML_SPECIAL = re.compile("[&<>\"\x00-\x1f\ufffe\uffff]")  # what lineage._xml rewrites
_NODE_KEYS = ("id", "run_id", "generation", "island", "operator", "policy_version", "status",
              "score")


def _grouped(pairs: Any) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for child, parent in pairs:
        out.setdefault(child, []).append(parent)
    return out


# -- the run's nodes ---------------------------------------------------------------------------
# -- exports -----------------------------------------------------------------------------------
def export_run(store: LineageStore, run_id: str | None, path: str | Path,
               format: str = "graphml") -> tuple[int, int]:
    """Write a run's lineage graph as ``graphml``, ``json`` or ``dot``, streamed.

    Returns:
        ``(programs, edges)`` written.
    """
    from qdevolve.db.lineage import EXPORT_FORMATS

    if format not in EXPORT_FORMATS:
        raise ValueError(f"unknown export format {format!r}; use one of {', '.join(EXPORT_FORMATS)}")
    rid = store.resolve_run(run_id)
    writer = {"graphml": _GraphML, "json": _NodeLink, "dot": _Dot}[format]
    source = _RunRows(store, rid)
    ids: set[str] = set()  # the run's program ids: an edge is written when both ends are
    with Path(path).open("w", encoding="utf-8") as fh:
        w = writer(fh, rid)
        n_nodes = 0
        if isinstance(w, _GraphML):
            with quiet_gc():
                single, multi = source.parents()
                parent_text = {**single, **{c: " ".join(ps) for c, ps in multi.items()}} if multi else single
                del single
                latest = source.latest()
                for rows in source.program_pages("id, generation, island, operator, policy_version"):
                    pids = list(map(itemgetter(1), rows))
                    w.page(rows, pids, list(map(latest.get, pids, repeat(NO_EVAL))),
                           list(map(parent_text.get, pids, repeat(""))))
                    ids.update(pids)
                    n_nodes += len(rows)
                del latest, parent_text
        else:
            for page in source.pages():
                for node in page:
                    w.node(node)
                    ids.add(node["id"])
                n_nodes += len(page)
        w.between()
        n_edges = 0
        for chunk in source.edges():
            chunk = [e for e in chunk if e[0] in ids and e[1] in ids]
            if isinstance(w, _GraphML):
                w.edge_page(chunk)
            else:
                for edge in chunk:
                    w.edge(*edge)
            n_edges += len(chunk)
        w.end()
    return n_nodes, n_edges


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
        from qdevolve.db.lineage import _xml

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
        from qdevolve.db.lineage import NO_POLICY

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
        from qdevolve.db.lineage import NO_POLICY

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


# -- the tree ----------------------------------------------------------------------------------
def children_of(store: LineageStore, parent_ids: Sequence[str],
                top: int) -> dict[str, tuple[list[dict[str, Any]], int]]:
    """For each parent: up to ``top`` children (best score first, unevaluated last, then
    insertion order) and how many children it has. One ranked query per 500 parents."""
    q = text(f"""
        SELECT parent_id, total, id, run_id, generation, island, operator, policy_version,
               status, score FROM (
            SELECT e.parent_id, p.id, p.run_id, p.generation, p.island, p.operator,
                   p.policy_version, ev.status, ev.score,
                   ROW_NUMBER() OVER (PARTITION BY e.parent_id
                                      ORDER BY (ev.score IS NULL), ev.score DESC, p.seq) AS rk,
                   COUNT(*) OVER (PARTITION BY e.parent_id) AS total
            FROM edges e JOIN programs p ON p.id = e.child_id
            LEFT JOIN evaluations ev ON {_LATEST}
            WHERE e.parent_id IN :ids AND {_GENEALOGY}
        ) ranked WHERE rk <= :k ORDER BY parent_id, rk""").bindparams(bindparam("ids", expanding=True))
    out: dict[str, tuple[list[dict[str, Any]], int]] = {pid: ([], 0) for pid in parent_ids}
    ids = list(dict.fromkeys(parent_ids))
    with store._connect() as c:
        for i in range(0, len(ids), _CHUNK):
            for row in c.execute(q, {"ids": ids[i:i + _CHUNK], "k": top}):
                kids, _ = out[row[0]]
                kids.append(dict(zip(_NODE_KEYS, row[2:], strict=True)))
                out[row[0]] = (kids, int(row[1]))
    return out


TREE_KEYS = ("id", "generation", "operator", "policy_version", "status", "score", "island")


def tree_children(store: LineageStore, run_id: str, top: int,
                  roots: list[tuple[Any, ...]] | None = None) -> dict[str, tuple[list[tuple[Any, ...]], int]]:
    """For every program of the run with children: up to ``top`` children (best score first,
    unevaluated last, then insertion order) as :data:`TREE_KEYS` tuples, and how many it has,
    from one pass over the run (:func:`qdevolve.db._tree.run_tree`). ``roots``: when given,
    filled with the run's programs without parents, ranked the same."""
    found, nodes = run_tree(store, run_id, _tree_tuples)
    if roots is not None:
        roots.extend(n[0] for n in found)
    return {pid: ([k[0] for k in n[1][:top]], len(n[1])) for pid, n in nodes.items() if n[1]}


def _tree_tuples(rows: list[tuple[Any, ...]], evs: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """:data:`TREE_KEYS` tuples from ``(seq, id, generation, operator, policy_version, island)``
    rows (:data:`qdevolve.db._tree.COLUMNS`) and their evaluations."""
    return [(pid, gen, op, pv, ev[1], ev[2], isl) for (_seq, pid, gen, op, pv, isl), ev in zip(rows, evs, strict=True)]


def all_children(store: LineageStore, run_id: str,
                 top: int) -> dict[str, tuple[list[dict[str, Any]], int]]:
    """:func:`children_of` for every program of the run at once, from one streamed pass over
    its nodes (cheaper than ranked queries once a tree covers most of a large run)."""
    out = {}
    for pid, (items, total) in tree_children(store, run_id, top).items():
        out[pid] = ([{"id": t[0], "run_id": run_id, "generation": t[1], "island": t[6], "operator": t[2],
                      "policy_version": t[3], "status": t[4], "score": t[5]} for t in items], total)
    return out


# -- archive replay ----------------------------------------------------------------------------
def _metrics_of(raw: Any) -> dict[str, Any]:
    """Stored metrics JSON as a dict (anything else, e.g. a tampered row: no metrics)."""
    try:
        m = json.loads(raw) if isinstance(raw, str | bytes) else raw
    except ValueError:
        return {}
    return m if isinstance(m, dict) else {}


def replay_stream(store: LineageStore, run_id: str, *, code_features: Collection[str] | None = (),
                  metric_features: Collection[str] | None = (), after_eval: int = 0,
                  covered: int = 0) -> Iterator[tuple[int, Program, EvalResult | None]]:
    """``(seq, program, latest evaluation)`` in the order the engine added them to the archive
    (by the id of each program's latest evaluation), then the unevaluated programs.

    Rows carry what an archive's ``add`` reads: ids, parents, island, generation, code hash,
    status, score and features; metrics and artifacts are left out. ``code`` is loaded only
    for ``ok`` rows whose stored features lack one of ``code_features`` (the archive then
    computes that feature from the code); ``None`` loads it for every ``ok`` row (an archive
    whose needs are unknown). Likewise ``metrics`` are loaded only for ``ok`` rows whose stored
    features lack one of ``metric_features`` (OpenEvolve-style feature dimensions read from the
    evaluator's metrics; ``None``: every ``ok`` row). Paged by evaluation id, so memory stays flat. ``after_eval``:
    start after this evaluation id (the rows an archive snapshot covers are skipped);
    ``covered``: the evaluated programs those skipped rows hold. When every program of the
    run is then accounted for, the scan for unevaluated programs is skipped.
    """
    code_q = text("SELECT id, code FROM programs WHERE id IN :ids").bindparams(
        bindparam("ids", expanding=True))
    metrics_q = text("SELECT id, metrics FROM evaluations WHERE id IN :ids").bindparams(
        bindparam("ids", expanding=True))
    evaluated = text(
        "SELECT ev.id, p.seq, p.id, p.run_id, '', p.code_hash, p.generation, p.island, "
        "p.operator, p.policy_version, p.created_at, ev.status, ev.score, ev.features "
        "FROM evaluations ev JOIN programs p ON p.id = ev.program_id "
        "WHERE ev.run_id = :r AND ev.id > :after AND ev.id = "
        "(SELECT MAX(e2.id) FROM evaluations e2 WHERE e2.program_id = ev.program_id) "
        "ORDER BY ev.id LIMIT :n")
    links = text(f"SELECT e.child_id, e.parent_id FROM evaluations ev JOIN edges e ON "
                 f"e.child_id = ev.program_id WHERE ev.run_id = :r AND ev.id > :lo AND ev.id <= :hi "
                 f"AND {_GENEALOGY} ORDER BY e.child_id, e.position")
    after, seen = after_eval, covered
    while True:
        with store._connect() as c:
            rows = c.execute(evaluated, {"r": run_id, "after": after, "n": _PAGE}).all()
            if not rows:
                break
            seen += len(rows)
            parents = _grouped(c.execute(links, {"r": run_id, "lo": after, "hi": rows[-1][0]}).all())
            feats = [json.loads(r[13]) if r[13] else {} for r in rows]
            want = [r[2] for r, f in zip(rows, feats, strict=True) if r[11] == "ok" and (
                code_features is None or any(f.get(d) is None for d in code_features))]
            codes: dict[str, str] = {}
            for i in range(0, len(want), _CHUNK):
                codes.update(c.execute(code_q, {"ids": want[i:i + _CHUNK]}).all())
            want_m = [r[0] for r, f in zip(rows, feats, strict=True) if r[11] == "ok" and (
                metric_features is None or any(f.get(d) is None for d in metric_features))]
            metrics: dict[int, dict[str, Any]] = {}
            for i in range(0, len(want_m), _CHUNK):
                for eid, m in c.execute(metrics_q, {"ids": want_m[i:i + _CHUNK]}).all():
                    metrics[eid] = _metrics_of(m)
        for r, f in zip(rows, feats, strict=True):
            prog = Program(id=r[2], run_id=r[3], code=codes.get(r[2], ""), code_hash=r[5],
                           generation=r[6], island=r[7], operator=r[8], policy_version=r[9],
                           created_at=r[10], parent_ids=tuple(parents.get(r[2], ())))
            status, error = known_status(r[11], None)
            yield r[1], prog, EvalResult(status=status, score=r[12], features=f, error=error,
                                         metrics=metrics.get(r[0], {}))
        after = rows[-1][0]
    if seen == store.count_programs(run_id):
        return
    unevaluated = text(
        "SELECT p.seq, p.id, p.run_id FROM programs p WHERE p.run_id = :r AND p.seq > :after "
        "AND NOT EXISTS (SELECT 1 FROM evaluations ev WHERE ev.program_id = p.id) "
        "ORDER BY p.seq LIMIT :n")
    after = 0
    while True:
        with store._connect() as c:
            rows = c.execute(unevaluated, {"r": run_id, "after": after, "n": _PAGE}).all()
        if not rows:
            return
        for seq, pid, rid in rows:
            yield seq, Program(id=pid, run_id=rid, code="", code_hash="-"), None
        after = rows[-1][0]
