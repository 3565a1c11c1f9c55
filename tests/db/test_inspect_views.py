"""The whole-run inspection paths on SQLite and PostgreSQL: ``lineage tree`` and the GraphML
export equal references built the slow, simple way (one query per node, the networkx graph),
byte for byte, also on rows that need escaping; ``archive stats`` from a stored snapshot plus
its tail equals a full replay."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest
from click.testing import CliRunner
from sqlalchemy import text

from qdevolve import registry
from qdevolve.archive.replay import replay
from qdevolve.archive.snapshot import encode, snapshot
from qdevolve.cli import lineage as C
from qdevolve.cli.archive import rebuild
from qdevolve.db import lineage as L
from qdevolve.db import snapshots, streams
from qdevolve.db.store import LineageStore
from qdevolve.textsafe import terminal_safe_line
from qdevolve.types import EvalResult, Program
from tests.db.conftest import random_tree


def _tampered(store: LineageStore, rid: str, progs: list[Program]) -> None:
    """Rows the fast paths must hand to their exact fallbacks: markup, a space and control
    characters in ids and operators, an unevaluated child, an unknown status, an inspiration edge, a child
    listing one parent twice, and a run next door."""
    odd = Program(code="x = 'odd'\n", run_id=rid, id="odd&<id> \x01", parent_ids=(progs[1].id,),
                  operator='op&"<\x07>', generation=2)
    twice = Program(code="x = 'twice'\n", run_id=rid, parent_ids=(progs[4].id, progs[2].id),
                    operator="crossover", generation=3)
    pending = Program(code="x = 'pending'\n", run_id=rid, parent_ids=(odd.id,), operator="diff",
                      policy_version=4)
    store.write(programs=[odd, twice, pending], evaluations=[
        (odd.id, EvalResult(status="error", score=0.25)), (twice.id, EvalResult(score=0.5))])
    with store._begin() as c:  # a status this qdevolve does not know, with an escape sequence
        c.execute(text("UPDATE evaluations SET status = :s WHERE program_id = :p"), {"s": "weird\x1b[2J", "p": odd.id})
    store.write(programs=[], edges=[(progs[3].id, progs[8].id, "inspiration"),
                                    (progs[2].id, twice.id, "migration")], run_id=rid)
    other = store.create_run(name="other")
    random_tree(store, other, 40, seed=9)


def _reference_tree(store: LineageStore, rid: str, depth: int, top: int) -> str:
    """``lineage tree`` the slow, simple way: one query for the roots, one per shown node."""
    def line(n: dict) -> str:
        safe = lambda v: v if v.isprintable() else terminal_safe_line(v)  # noqa: E731
        score = "-" if n["score"] is None else f"{n['score']:.6g}"
        tail = "" if n["status"] == "ok" else ", unevaluated" if n["status"] is None else f", {safe(n['status'])}"
        return f"{safe(n['id'][:10])}  score={score}  (gen {n['generation']}, {safe(n['operator'])}{tail})"

    out = [f"run {rid[:12]} ({store.get_run(rid)['name']}): {store.count_programs(rid)} programs"]

    def grow(n: dict, prefix: str, last: bool, level: int, path: tuple) -> None:
        out.append(f"{prefix}{'└── ' if last else '├── '}{line(n)}")
        inner = prefix + ("    " if last else "│   ")
        if level >= depth:  # the tree stops here, and says how many children it leaves out
            _kids, cut = L.children(store, n["id"], 1)
            if cut > 0:
                out.append(f"{inner}└── ... +{cut} {'child' if cut == 1 else 'children'} below, cut at --depth "
                           f"{depth} (--depth {depth + 1} or --root {n['id'][:12]} shows them)")
            return
        if n["id"] in path:
            return
        kids, total = L.children(store, n["id"], top)
        for i, k in enumerate(kids):
            grow(k, inner, i == len(kids) - 1 and total <= len(kids), level + 1, (*path, n["id"]))
        if total > len(kids):
            out.append(f"{inner}└── ... {total - len(kids)} more")

    roots, total = L.roots(store, rid, top)
    for i, r in enumerate(roots):
        grow(r, "", i == len(roots) - 1 and total <= len(roots), 0, ())
    if total > len(roots):
        out.append(f"└── ... {total - len(roots)} more roots")
    return "\n".join(out) + "\n"


def _db_arg(store: LineageStore) -> str:
    return str(store.path) if store.path is not None else store.target


@pytest.mark.slow
def test_tree_equals_a_per_node_reference(store: LineageStore) -> None:
    rid = store.create_run(name="t")
    progs = random_tree(store, rid, 2600, seed=5)
    _tampered(store, rid, progs)
    assert store.count_programs(rid) > C._WIDE  # the CLI takes the one-pass path on this run
    for depth, top in ((4, 3), (50, 1000)):
        got = CliRunner().invoke(C.lineage, ["tree", "--db", _db_arg(store), "--run", rid, "--depth",
                                             str(depth), "--top", str(top)], catch_exceptions=False)
        assert got.exit_code == 0
        assert got.output == _reference_tree(store, rid, depth, top)


def _reference_graphml(store: LineageStore, rid: str) -> str:
    """The GraphML ``export_run`` writes, built node by node from the networkx run graph and
    the stored edge rows."""
    g = L.run_graph(store, rid)
    head = ["<?xml version='1.0' encoding='utf-8'?>\n",
            '<graphml xmlns="http://graphml.graphdrawing.org/xmlns" '
            'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
            'xsi:schemaLocation="http://graphml.graphdrawing.org/xmlns '
            'http://graphml.graphdrawing.org/xmlns/1.0/graphml.xsd">\n',
            '<key id="d0" for="graph" attr.name="run_id" attr.type="string"/>\n']
    names = ("id", "run_id", "generation", "island", "operator", "policy_version", "status", "score",
             "parent_ids")
    types = ("string", "string", "long", "long", "string", "long", "string", "double", "string")
    head += [f'<key id="n{i}" for="node" attr.name="{n}" attr.type="{t}"/>\n'
             for i, (n, t) in enumerate(zip(names, types, strict=True))]
    head += ['<key id="e0" for="edge" attr.name="role" attr.type="string"/>\n',
             '<key id="e1" for="edge" attr.name="position" attr.type="long"/>\n',
             f'<graph edgedefault="directed">\n<data key="d0">{L._xml(rid)}</data>\n']
    parents: dict[str, list] = {}  # every genealogy edge row, by position (a parent may come twice)
    for child, parent, pos in store.execute("SELECT child_id, parent_id, position FROM edges WHERE run_id = :r "
                                            "AND role <> 'inspiration'", r=rid):
        parents.setdefault(child, []).append((pos, parent))
    for n, d in g.nodes(data=True):
        parts = [f'<node id="{L._xml(n)}">']
        for i, name in enumerate(names):
            v = " ".join(p for _, p in sorted(parents.get(n, []))) if name == "parent_ids" else d[name]
            if v is None and name == "status":
                continue
            v = {"policy_version": L.NO_POLICY, "score": "NaN"}.get(name) if v is None else v
            parts.append(f'<data key="n{i}">{L._xml(v)}</data>')
        head.append("".join(parts) + "</node>\n")
    for a, b, role, pos in store.execute("SELECT parent_id, child_id, role, position FROM edges WHERE run_id = :r",
                                         r=rid):
        if a in g and b in g:
            head.append(f'<edge source="{L._xml(a)}" target="{L._xml(b)}"><data key="e0">{L._xml(role)}</data>'
                        f'<data key="e1">{pos}</data></edge>\n')
    return "".join(head) + "</graph>\n</graphml>\n"


def test_graphml_export_equals_a_per_node_reference(store: LineageStore, tmp_path: Path) -> None:
    rid = store.create_run(name="g&<run>")
    progs = random_tree(store, rid, 600, seed=2)
    _tampered(store, rid, progs)
    new = tmp_path / "new.graphml"
    expected = _reference_graphml(store, rid)
    assert streams.export_run(store, rid, new, "graphml") == (expected.count("<node "), expected.count("<edge "))
    assert new.read_text(encoding="utf-8") == expected
    assert nx.read_graphml(new).number_of_nodes() == store.count_programs(rid)  # well-formed XML


def test_stats_from_a_stored_snapshot_equal_a_full_replay(store: LineageStore) -> None:
    spec = {"type": "islands", "n_islands": 2, "migration_interval": 3, "feature_dimensions": ["w", "diversity"],
            "bins": 4}
    rid = store.create_run(name="s", config={"archive": spec})
    arc = registry.archive.create(spec)
    seed = Program(code="x = 0\n", run_id=rid)
    progs, results = [seed], [EvalResult(score=0.0, features={"w": 0.0})]
    for i in range(1, 120):
        parent = progs[(i * 7) % len(progs)]
        progs.append(Program(code=f"x = {i}\n" + "y = 1\n" * (i % 5), run_id=rid, parent_ids=(parent.id,),
                             island=i % 2, operator="diff"))
        results.append(EvalResult(score=float((i * 37) % 11), features={"w": float(i % 9)}) if i % 13
                       else EvalResult(status="error", error="x"))
    for i, (p, r) in enumerate(zip(progs, results, strict=True)):  # one tell per program, like the engine
        events = arc.add(p, r)
        store.write(programs=[p], evaluations=[(p.id, r)], events=events, run_id=rid,
                    snapshot=encode(snapshot(arc)) if i in (40, 90) else None)
    snap = snapshots.latest(store, rid)
    assert snap is not None and snap.evaluations == 91
    full = replay(spec, streams.replay_stream(store, rid, code_features={"diversity"}), record_every=10**9)
    _run, fast = rebuild(store, rid, points=1)
    assert encode(full.archive.stats()) == encode(fast.archive.stats())
    assert encode(snapshot(full.archive)) == encode(snapshot(fast.archive))
    assert (full.programs, full.evaluated, full.by_status, full.events) == \
        (fast.programs, fast.evaluated, fast.by_status, fast.events)


def _plain_run(store: LineageStore, n: int, *, reevaluate: bool) -> str:
    """A run as the engine stores it (every program with its evaluation, crossovers included);
    ``reevaluate``: one program gets a second, later evaluation (the latest must win)."""
    rid = store.create_run(name="plain")
    progs = random_tree(store, rid, n, seed=11)
    if reevaluate:
        store.write(programs=[], evaluations=[(progs[5].id, EvalResult(score=2.5))], run_id=rid)
    return rid


@pytest.mark.slow
def test_tree_and_export_of_a_plain_run_equal_the_references(store: LineageStore, tmp_path: Path) -> None:
    """The fast paths (evaluations in program order, no escaping, the sqlite3 view on a file)
    and the lookup by id after a re-evaluation give what the slow references give."""
    for reevaluate in (False, True):
        rid = _plain_run(store, C._WIDE + 300, reevaluate=reevaluate)
        got = CliRunner().invoke(C.lineage, ["tree", "--db", _db_arg(store), "--run", rid, "--depth", "50",
                                             "--top", "1000"], catch_exceptions=False)
        assert got.exit_code == 0
        assert got.output == _reference_tree(store, rid, 50, 1000)
        out = tmp_path / f"plain{reevaluate}.graphml"
        got = CliRunner().invoke(C.lineage, ["export", "--db", _db_arg(store), "--run", rid, "--out", str(out)],
                                 catch_exceptions=False)
        assert got.exit_code == 0
        assert out.read_text(encoding="utf-8") == _reference_graphml(store, rid)


@pytest.mark.slow
def test_whole_run_views_of_a_sqlite_file_never_import_sqlalchemy(tmp_path: Path) -> None:
    """``lineage tree`` and ``lineage export`` read a SQLite file through the standard sqlite3
    module: SQLAlchemy's import alone is about 0.45 s of a 200,000-program export."""
    db = tmp_path / "run.sqlite"
    with LineageStore(db) as st:
        rid = _plain_run(st, C._WIDE + 10, reevaluate=False)
        want = _reference_tree(st, rid, 50, 1000)
    code = ("import sys; from qdevolve.cli import main\n"
            "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "print('SQLALCHEMY' if 'sqlalchemy' in sys.modules else 'NO-SQLALCHEMY')\n")
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    tree = subprocess.run([sys.executable, "-c", code, "lineage", "tree", "--db", str(db), "--depth", "50",
                           "--top", "1000"], capture_output=True, text=True, env=env, check=True)
    assert tree.stdout == want + "NO-SQLALCHEMY\n"
    out = tmp_path / "run.graphml"
    export = subprocess.run([sys.executable, "-c", code, "lineage", "export", "--db", str(db), "--out", str(out)],
                            capture_output=True, text=True, env=env, check=True)
    assert export.stdout.endswith("NO-SQLALCHEMY\n")
    with LineageStore(db) as st:
        assert out.read_text(encoding="utf-8") == _reference_graphml(st, rid)
