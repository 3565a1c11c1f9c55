"""Whole-run views that stay cheap at 200,000 programs: streamed, aggregated in the database.

* :func:`export_run` writes GraphML, node-link JSON or DOT, streamed
  (:mod:`qdevolve.db._export`).
* :func:`tree_children` and :func:`all_children` give every program's ranked children from
  one pass over the run (:mod:`qdevolve.db._tree`).
* :func:`children_of` fetches the top-K children of many parents in one query per 500
  parents (a window function ranks each parent's children), so ``lineage tree`` costs one
  query per level instead of two per node.
* :func:`replay_stream` yields the light ``(seq, Program, EvalResult)`` rows an archive
  replay needs: no code unless a code-based feature needs it, no metrics, no artifacts.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Sequence
from typing import Any

from sqlalchemy import bindparam, text

from qdevolve.db._export import export_run
from qdevolve.db._rows import known_status
from qdevolve.db._tree import TREE_KEYS, run_tree
from qdevolve.db.store import LineageStore
from qdevolve.types import EvalResult, Program

__all__ = ["export_run", "children_of", "all_children", "tree_children", "replay_stream", "CODE_FEATURES",
           "TREE_KEYS"]

CODE_FEATURES = ("code_length", "complexity", "ast_complexity", "diversity", "code_diversity")  # built-ins computed from code
_PAGE = 5000
_CHUNK = 500
_GENEALOGY = "e.role <> 'inspiration'"
_LATEST = "ev.id = (SELECT MAX(e2.id) FROM evaluations e2 WHERE e2.program_id = p.id)"
_NODE_KEYS = ("id", "run_id", "generation", "island", "operator", "policy_version", "status",
              "score")


def _grouped(pairs: Any) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for child, parent in pairs:
        out.setdefault(child, []).append(parent)
    return out


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


def _tests_of(raw: Any) -> list[float] | None:
    """A stored per-test vector as floats (the ``dgm`` archive's clade statistics read it);
    ``None`` when absent or not a list of numbers (a tampered row)."""
    if raw is None:
        return None
    try:
        t = json.loads(raw) if isinstance(raw, str | bytes) else raw
    except ValueError:
        return None
    if not isinstance(t, list) or not all(isinstance(x, int | float) and not isinstance(x, bool) for x in t):
        return None
    return [float(x) for x in t]


def replay_stream(store: LineageStore, run_id: str, *, code_features: Collection[str] | None = (),
                  metric_features: Collection[str] | None = (), after_eval: int = 0,
                  covered: int = 0) -> Iterator[tuple[int, Program, EvalResult | None]]:
    """``(seq, program, latest evaluation)`` in the order the engine added them to the archive
    (by the id of each program's latest evaluation), then the unevaluated programs.

    Rows carry what an archive's ``add`` reads: ids, parents, island, generation, code hash,
    status, score, features and the per-test vector of ``ok`` rows (the ``dgm`` archive's
    clade statistics count it); artifacts are left out. ``code`` is loaded only
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
        "p.operator, p.policy_version, p.created_at, ev.status, ev.score, ev.features, ev.tests "
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
                                         metrics=metrics.get(r[0], {}),
                                         tests=_tests_of(r[14]) if status == "ok" else None)
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
