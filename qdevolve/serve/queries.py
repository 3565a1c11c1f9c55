"""Read-only queries over the lineage tables (SQLAlchemy Core selects, no store internals).

Every function takes a :class:`~qdevolve.serve.db.ReadOnlyDB` and returns plain dicts and
lists ready for JSON. Columns a database lacks read as ``None``; a table it lacks reads as
empty. JSON-valued columns are decoded leniently: text that is not JSON is returned as text.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Table, func, literal, or_, select

from qdevolve.serve.db import ReadOnlyDB

__all__ = ["NotFound", "list_runs", "resolve_run", "run_stamp", "lineage_rows", "resolve_program",
           "program_detail", "ancestors", "children", "archive_events", "features_of", "metrics_of",
           "recent_ok_metrics", "evaluation_scores",
           "policy_versions", "rollout_rewards", "decode"]

ANCESTOR_LIMIT = 500


class NotFound(LookupError):
    """No run or program matches the id (or id prefix) asked for."""


def decode(text: Any, default: Any = None) -> Any:
    """Decode a JSON column; ``default`` for NULL, the raw text when it is not JSON."""
    if text is None:
        return default
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def number(value: Any) -> float | None:
    """A number column's value as a float; ``None`` for NULL or for what is not a number (text,
    bytes: a crafted database)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def whole(value: Any, default: int | None = None) -> int | None:
    """An integer column's value; ``default`` for NULL or for what is not a whole number."""
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return default


def _cols(t: Table, *names: str) -> list[Any]:
    return [t.c[n] for n in names if n in t.c]


def _row(row: Any) -> dict[str, Any]:
    return dict(row._mapping)


# ------------------------------------------------------------------------ runs
def list_runs(db: ReadOnlyDB) -> list[dict[str, Any]]:
    """Every run, newest first, with program/evaluation counts and the best ``ok`` score."""
    runs, progs, evals = db.table("runs"), db.table("programs"), db.table("evaluations")
    if runs is None:
        return []
    with db.engine.connect() as con:
        rows = [_row(r) for r in con.execute(select(runs).order_by(runs.c.updated_at.desc()))]
        n_prog = dict(con.execute(select(progs.c.run_id, func.count()).group_by(progs.c.run_id)).all())
        n_eval: dict[str, int] = {}
        best: dict[str, float] = {}
        if evals is not None:
            n_eval = dict(con.execute(select(evals.c.run_id, func.count()).group_by(evals.c.run_id)).all())
            best = dict(con.execute(select(evals.c.run_id, func.max(evals.c.score))
                                    .where(evals.c.status == "ok").group_by(evals.c.run_id)).all())
    for r in rows:
        r["config"] = decode(r.get("config"), {})
        r["programs"] = int(n_prog.get(r["id"], 0))
        r["evaluations"] = int(n_eval.get(r["id"], 0))
        r["best_score"] = best.get(r["id"])
    return rows


def resolve_run(db: ReadOnlyDB, ref: str | None) -> dict[str, Any]:
    """The run whose id is ``ref`` or starts with it (``None``: the most recently updated).

    Reads only the ``runs`` table (no counts): every page and API call resolves its run.
    """
    runs = db.table("runs")
    if runs is None:
        raise NotFound("the database holds no runs yet")
    with db.engine.connect() as con:
        if not ref:
            rows = con.execute(select(runs).order_by(runs.c.updated_at.desc()).limit(1)).all()
            if not rows:
                raise NotFound("the database holds no runs yet")
        else:
            rows = con.execute(select(runs).where(runs.c.id == ref)).all()
            if not rows and all(c.isalnum() or c in "-_" for c in ref):
                rows = con.execute(select(runs).where(runs.c.id.like(ref + "%")).limit(2)).all()
    if len(rows) != 1:
        raise NotFound(f"run {ref!r}: " + ("no such run" if not rows else "several runs match; give more of the id"))
    run = _row(rows[0])
    run["config"] = decode(run.get("config"), {})
    return run


def run_stamp(db: ReadOnlyDB, run_id: str) -> dict[str, Any]:
    """What changes while a run writes: counts and last ids. Pages poll it to refresh."""
    runs, progs, evals, pv = (db.table(n) for n in ("runs", "programs", "evaluations", "policy_versions"))
    with db.engine.connect() as con:
        n, last = con.execute(select(func.count(), func.max(progs.c.seq)).where(progs.c.run_id == run_id)).one()
        ne, laste = (0, None)
        if evals is not None:
            ne, laste = con.execute(select(func.count(), func.max(evals.c.id)).where(evals.c.run_id == run_id)).one()
        npv = 0
        if pv is not None:
            npv = con.execute(select(func.count()).select_from(pv).where(pv.c.run_id == run_id)).scalar_one()
        status, updated = con.execute(select(runs.c.status, runs.c.updated_at).where(runs.c.id == run_id)).one()
    return {"run_id": run_id, "status": status, "updated_at": updated, "programs": int(n), "last_seq": last,
            "evaluations": int(ne), "last_evaluation": laste, "policy_versions": int(npv)}


# --------------------------------------------------------------------- lineage
def lineage_rows(db: ReadOnlyDB, run_id: str, *, after_seq: int | None = None,
                 after_evaluation: int | None = None) -> dict[str, Any]:
    """Columnar lineage of a run: programs in insertion order, their parents and last evaluation.

    Returns ``{"id", "gen", "island", "op", "pv", "parent", "extra_parents", "status", "score"}``:
    lists aligned with ``id`` (``parent``: the position-0 parent or None; ``status``/``score``
    from the program's latest evaluation, None when not evaluated yet) and ``extra_parents``,
    a dict child id -> further (crossover) parent ids. Inspiration edges are not lineage.

    With ``after_seq``/``after_evaluation`` only programs inserted after that ``seq`` (with
    their edges) are listed, and ``"evaluations"`` maps every program evaluated after that
    evaluation id to its latest ``(status, score)``: what a live page needs to extend a tree.

    Three index-ordered scans joined in Python: on SQLite this is faster than one joined
    select with a per-program subquery (measured: 2.3 s against 3.6 s for 100,000 programs on
    a loaded 2-core machine).
    """
    progs, edges, evals = db.table("programs"), db.table("edges"), db.table("evaluations")
    cols = [progs.c.id, progs.c.generation, *(progs.c[n] if n in progs.c else literal(None).label(n)
                                              for n in ("island", "operator", "policy_version"))]
    q = select(*cols).where(progs.c.run_id == run_id).order_by(progs.c.seq)
    if after_seq is not None:
        q = q.where(progs.c.seq > after_seq)
    parent: dict[str, str] = {}
    extra: dict[str, list[str]] = {}
    last: dict[str, tuple[Any, Any]] = {}
    with db.engine.connect() as con:
        rows = con.execute(q).all()
        if edges is not None:
            eq = (select(edges.c.child_id, edges.c.parent_id, edges.c.position)
                  .where(edges.c.run_id == run_id, edges.c.role != "inspiration"))
            if after_seq is not None:
                eq = eq.where(edges.c.child_id.in_([r[0] for r in rows]))
            later: list[tuple[str, int, str]] = []
            for child, par, position in con.execute(eq).all():
                if position:
                    later.append((child, position, par))
                else:
                    parent[child] = par  # several position-0 edges (unusual roles): one is kept
            for child, _, par in sorted(later):
                extra.setdefault(child, []).append(par)
        if evals is not None:
            vq = (select(evals.c.program_id, evals.c.status, evals.c.score)
                  .where(evals.c.run_id == run_id).order_by(evals.c.id))
            if after_evaluation is not None:
                vq = vq.where(evals.c.id > after_evaluation)
            erows = con.execute(vq).all()
            last = {pid: (None if st is None else str(st), number(sc)) for pid, st, sc in erows}  # the latest wins
    names = ("id", "gen", "island", "op", "pv")
    out: dict[str, Any] = ({k: list(v) for k, v in zip(names, zip(*rows, strict=True), strict=True)} if rows
                           else {k: [] for k in names})
    # a database may come from anyone: a number column may hold text (SQLite keeps any type)
    out["gen"] = [whole(g, 0) for g in out["gen"]]
    out["island"] = [whole(v) for v in out["island"]]
    out["pv"] = [whole(v) for v in out["pv"]]
    out["op"] = [None if v is None else str(v) for v in out["op"]]
    none = (None, None)
    evs = [last.get(pid, none) for pid in out["id"]]
    out["status"] = [e[0] for e in evs]
    out["score"] = [e[1] for e in evs]
    out["parent"] = [parent.get(pid) for pid in out["id"]]
    out["extra_parents"] = extra
    out["evaluations"] = last
    out["n_evaluations"] = len(erows) if evals is not None else 0
    return out


# --------------------------------------------------------------------- programs
def resolve_program(db: ReadOnlyDB, ref: str) -> str:
    """The program id equal to ``ref`` or the only one starting with it."""
    progs = db.table("programs")
    with db.engine.connect() as con:
        if con.execute(select(progs.c.id).where(progs.c.id == ref)).first():
            return ref
        if len(ref) >= 4 and all(c in "0123456789abcdefABCDEF-_" for c in ref):
            hits = con.execute(select(progs.c.id).where(progs.c.id.like(ref + "%")).limit(2)).scalars().all()
            if len(hits) == 1:
                return hits[0]
            if hits:
                raise NotFound(f"program {ref!r}: several programs match; give more of the id")
    raise NotFound(f"program {ref!r}: no such program")


def program_detail(db: ReadOnlyDB, pid: str) -> dict[str, Any]:
    """Everything stored about one program: row, evaluations, parents, archive events, rollouts."""
    progs, edges, evals = db.table("programs"), db.table("edges"), db.table("evaluations")
    events, rolls = db.table("archive_events"), db.table("rollouts")
    with db.engine.connect() as con:
        row = con.execute(select(progs).where(progs.c.id == pid)).first()
        if row is None:
            raise NotFound(f"program {pid!r}: no such program")
        p = _row(row)
        p["metadata"] = decode(p.get("metadata"), {})
        p["evaluations"] = []
        if evals is not None:
            for r in con.execute(select(evals).where(evals.c.program_id == pid).order_by(evals.c.id)):
                e = _row(r)
                for k, default in (("metrics", {}), ("tests", None), ("features", {}), ("artifacts", {})):
                    if k in e:
                        e[k] = decode(e[k], default)
                p["evaluations"].append(e)
        p["parents"] = []
        if edges is not None:
            q = (select(edges.c.parent_id, edges.c.role, edges.c.position, progs.c.code, progs.c.generation)
                 .join(progs, progs.c.id == edges.c.parent_id, isouter=True)
                 .where(edges.c.child_id == pid).order_by(edges.c.role, edges.c.position))
            p["parents"] = [_row(r) for r in con.execute(q)]
        p["archive_events"] = []
        if events is not None:
            p["archive_events"] = [{**_row(r), "data": decode(r._mapping.get("data"), {})} for r in
                                   con.execute(select(events).where(events.c.program_id == pid).order_by(events.c.id))]
        p["rollouts"] = []
        if rolls is not None:
            cols = [c for c in rolls.c if c.name not in ("prompt_token_ids", "token_ids", "logprobs")]
            for r in con.execute(select(*cols).where(rolls.c.program_id == pid).order_by(rolls.c.seq)):
                d = _row(r)
                d["reward_vector"] = decode(d.get("reward_vector"))
                d["metadata"] = decode(d.get("metadata"), {})
                p["rollouts"].append(d)
    return p


def ancestors(db: ReadOnlyDB, pid: str, limit: int = ANCESTOR_LIMIT) -> list[dict[str, Any]]:
    """Ancestors of ``pid`` nearest first (breadth-first over every parent edge), at most ``limit``."""
    edges = db.table("edges")
    if edges is None:
        return []
    seen, frontier, order = {pid}, [pid], []
    with db.engine.connect() as con:
        while frontier and len(order) < limit:
            rows = con.execute(select(edges.c.parent_id).where(edges.c.child_id.in_(frontier),
                                                               edges.c.role != "inspiration")).scalars().all()
            frontier = []
            for parent in rows:
                if parent not in seen:
                    seen.add(parent)
                    frontier.append(parent)
                    order.append(parent)
    return _summaries(db, order[:limit])


def children(db: ReadOnlyDB, pid: str) -> list[dict[str, Any]]:
    """Programs that name ``pid`` as a parent (mutation or crossover), oldest first."""
    edges = db.table("edges")
    if edges is None:
        return []
    with db.engine.connect() as con:
        ids = con.execute(select(edges.c.child_id).where(edges.c.parent_id == pid, edges.c.role != "inspiration")
                          ).scalars().all()
    return _summaries(db, list(dict.fromkeys(ids)))


def _summaries(db: ReadOnlyDB, ids: list[str]) -> list[dict[str, Any]]:
    """id, generation, operator, status, score of each program, in the order of ``ids``."""
    progs, evals = db.table("programs"), db.table("evaluations")
    info: dict[str, dict[str, Any]] = {}
    with db.engine.connect() as con:
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            for r in con.execute(select(progs.c.id, progs.c.generation, progs.c.operator, progs.c.seq)
                                 .where(progs.c.id.in_(chunk))):
                info[r.id] = {"id": r.id, "generation": r.generation, "operator": r.operator, "seq": r.seq,
                              "status": None, "score": None}
            if evals is not None:
                for r in con.execute(select(evals.c.program_id, evals.c.status, evals.c.score)
                                     .where(evals.c.program_id.in_(chunk)).order_by(evals.c.id)):
                    if r.program_id in info:
                        info[r.program_id].update(status=r.status, score=r.score)
    return [info[i] for i in ids if i in info]


# ---------------------------------------------------------------- archive, policy
def archive_events(db: ReadOnlyDB, run_id: str) -> list[dict[str, Any]]:
    """Archive events of a run in order (``id, program_id, archive, island, cell, kind, replaced_id, score``)."""
    events = db.table("archive_events")
    if events is None:
        return []
    with db.engine.connect() as con:
        return [_row(r) for r in con.execute(select(*_cols(events, "id", "program_id", "archive", "island", "cell",
                                                             "kind", "replaced_id", "score"))
                                              .where(events.c.run_id == run_id).order_by(events.c.id))]


def _latest_eval_column(db: ReadOnlyDB, ids: list[str], column: str) -> dict[str, Any]:
    """Program id -> ``column`` of its latest evaluation, decoded leniently (maybe not a dict)."""
    evals = db.table("evaluations")
    out: dict[str, Any] = {}
    if evals is None:
        return out
    with db.engine.connect() as con:
        for i in range(0, len(ids), 500):
            for pid, v in con.execute(select(evals.c.program_id, evals.c[column])
                                      .where(evals.c.program_id.in_(ids[i:i + 500])).order_by(evals.c.id)):
                out[pid] = decode(v, {})
    return out


def features_of(db: ReadOnlyDB, ids: list[str]) -> dict[str, Any]:
    """Program id -> features of its latest evaluation."""
    return _latest_eval_column(db, ids, "features")


def metrics_of(db: ReadOnlyDB, ids: list[str]) -> dict[str, Any]:
    """Program id -> metrics of its latest evaluation (decoded leniently: maybe not a dict)."""
    return _latest_eval_column(db, ids, "metrics")


def recent_ok_metrics(db: ReadOnlyDB, run_id: str, limit: int) -> list[tuple[str, Any]]:
    """``(program_id, metrics)`` of a run's ``limit`` newest ``ok`` evaluations, oldest first."""
    evals = db.table("evaluations")
    if evals is None:
        return []
    with db.engine.connect() as con:
        rows = con.execute(select(evals.c.program_id, evals.c.metrics)
                           .where(evals.c.run_id == run_id, evals.c.status == "ok")
                           .order_by(evals.c.id.desc()).limit(limit)).all()
    return [(pid, decode(m, {})) for pid, m in reversed(rows)]


def evaluation_scores(db: ReadOnlyDB, run_id: str) -> list[tuple[str, str, float | None]]:
    """``(program_id, status, score)`` of every evaluation of a run, in order."""
    evals = db.table("evaluations")
    if evals is None:
        return []
    with db.engine.connect() as con:
        return [tuple(r) for r in con.execute(select(evals.c.program_id, evals.c.status, evals.c.score)
                                              .where(evals.c.run_id == run_id).order_by(evals.c.id))]


def policy_versions(db: ReadOnlyDB, run_id: str) -> list[dict[str, Any]]:
    """Policy versions of a run (``[]`` when the database has no policy tables)."""
    pv = db.table("policy_versions")
    if pv is None:
        return []
    with db.engine.connect() as con:
        rows = [_row(r) for r in con.execute(select(pv).where(pv.c.run_id == run_id).order_by(pv.c.version))]
    for r in rows:
        r["metrics"] = decode(r.get("metrics"), {})
    return rows


def rollout_rewards(db: ReadOnlyDB, run_id: str) -> list[tuple[int | None, float | None]]:
    """``(policy_version, reward)`` of every rollout of a run."""
    rolls = db.table("rollouts")
    if rolls is None:
        return []
    with db.engine.connect() as con:
        return [tuple(r) for r in con.execute(select(rolls.c.policy_version, rolls.c.reward)
                                              .where(rolls.c.run_id == run_id))]


def programs_per_version(db: ReadOnlyDB, run_id: str) -> dict[int, dict[str, Any]]:
    """Per policy version: programs produced, how many evaluated ``ok``, and their best score."""
    progs, evals = db.table("programs"), db.table("evaluations")
    out: dict[int, dict[str, Any]] = {}
    with db.engine.connect() as con:
        for v, n in con.execute(select(progs.c.policy_version, func.count()).where(
                progs.c.run_id == run_id, progs.c.policy_version.is_not(None)).group_by(progs.c.policy_version)):
            out[int(v)] = {"programs": int(n), "ok": 0, "best_score": None}
        if evals is not None and out:
            q = (select(progs.c.policy_version, func.count(), func.max(evals.c.score))
                 .join(evals, evals.c.program_id == progs.c.id)
                 .where(progs.c.run_id == run_id, progs.c.policy_version.is_not(None),
                        or_(evals.c.status == "ok"))
                 .group_by(progs.c.policy_version))
            for v, n, best in con.execute(q):
                out[int(v)].update(ok=int(n), best_score=best)
    return out
