"""The lineage store: every program, edge, evaluation, archive event, rollout and policy
version of every run, in SQLite (embedded default, WAL) or PostgreSQL.

The database *is* the checkpoint: archives, islands, feature ranges, random state and
trainer state are rebuilt from it on resume. Writes are batched: :meth:`LineageStore.write`
stores any mix of rows in one transaction, so a process killed mid-batch leaves either the
whole batch or none of it.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Connection,
    Engine,
    create_engine,
    event,
    func,
    insert,
    inspect,
    select,
    text,
    update,
)
from sqlalchemy.engine import make_url
from sqlalchemy.pool import QueuePool

from qdevolve.db import _open
from qdevolve.db import schema as S
from qdevolve.errors import DatabaseError
from qdevolve.types import ArchiveEvent, EvalResult, Program, Rollout, new_id

__all__ = ["LineageStore", "open_store", "dumps", "loads"]

BUSY_TIMEOUT_S = 120.0
_WRITE_OPTION = "qdevolve_write"
CACHE_KIB = 131072  # per-connection page cache: keeps the random-key indexes hot
WAL_CHECKPOINT_PAGES = 16384  # checkpoint every ~64 MiB of WAL: fewer, larger fsyncs
_MARKS = {"qmark": "?", "format": "%s", "pyformat": "%s"}
_PROGRAM_COLS = ("id", "run_id", "code", "language", "code_hash", "generation", "island",
                 "operator", "prompt_hash", "policy_version", "created_at", "metadata")
_EDGE_COLS = ("parent_id", "child_id", "role", "position", "run_id")
_EVAL_COLS = ("program_id", "run_id", "status", "score", "metrics", "tests", "features",
              "artifacts", "error", "runtime_s", "peak_memory_mb", "sandbox", "created_at")
_EVENT_COLS = ("run_id", "program_id", "archive", "island", "cell", "kind", "replaced_id",
               "score", "data", "created_at")
_ROLLOUT_COLS = ("id", "run_id", "program_id", "group_id", "policy_version", "prompt",
                 "completion", "prompt_token_ids", "token_ids", "logprobs", "reward",
                 "reward_vector", "cluster_key", "finish_reason", "prompt_tokens",
                 "completion_tokens", "created_at", "metadata")
_STATE_COLS = ("run_id", "key", "value", "updated_at")


def _clean(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return None if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalars
        return _clean(obj.item())
    return obj


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def dumps(obj: Any) -> str:
    """JSON text for a TEXT column (NaN/inf made representable, numpy scalars unwrapped)."""
    if not obj and isinstance(obj, dict):
        return "{}"
    try:
        return _ENCODER.encode(obj)  # fast path: plain JSON values
    except (TypeError, ValueError):
        return json.dumps(_clean(obj), separators=(",", ":"), ensure_ascii=False)


def loads(s: str | None, default: Any = None) -> Any:
    if s is None:
        return default
    return json.loads(s)


def _sqlite_engine(path: Path) -> Engine:
    engine = create_engine(
        f"sqlite:///{path}",
        poolclass=QueuePool,
        pool_size=4,
        max_overflow=8,
        connect_args={"timeout": BUSY_TIMEOUT_S, "check_same_thread": False},
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_con: Any, _rec: Any) -> None:
        dbapi_con.isolation_level = None  # we issue BEGIN IMMEDIATE ourselves
        cur = dbapi_con.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute(f"PRAGMA cache_size={-CACHE_KIB}")
        cur.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_PAGES}")
        cur.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        # Writers take the write lock up front (no deadlocked read->write upgrades between
        # processes); readers use a deferred snapshot so they never block writers under WAL.
        if conn.get_execution_options().get(_WRITE_OPTION):
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            conn.exec_driver_sql("BEGIN")

    return engine


class LineageStore:
    """A run database. Open with :func:`open_store` or ``LineageStore(path_or_url)``.

    Args:
        target: A file path (SQLite) or an SQLAlchemy URL (``postgresql+psycopg://...``).
        create: Create the database (and parent directories) when missing.

    Attributes:
        name: How messages name the database (a URL's password masked).
    """

    def __init__(self, target: str | Path, *, create: bool = True) -> None:
        self.target = str(target)
        self._pid = os.getpid()
        if _open.is_url(self.target):
            self.name = make_url(self.target).render_as_string(hide_password=True)
            self.path: Path | None = None
            self.engine = create_engine(self.target, pool_pre_ping=True)
            needs_init = self._check_url(create)
        else:
            self.path = Path(self.target)
            self.name = self.target
            needs_init = _open.check_sqlite_file(self.path, create=create)
            if needs_init:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self.engine = _sqlite_engine(self.path)
        if needs_init:
            self._init_schema()

    # -- setup ----------------------------------------------------------------------------
    def _check_url(self, create: bool) -> bool:
        try:
            names = set(inspect(self.engine).get_table_names())
        except Exception as exc:
            cause = getattr(exc, "orig", None) or exc
            detail = " ".join(str(cause).split())  # one line
            raise DatabaseError(f"{self.name}: cannot connect ({type(cause).__name__}: {detail}); "
                                f"check the URL, the server and the credentials") from exc
        if "qdevolve_schema" not in names:
            if names and not create:
                raise DatabaseError(f"{self.name}: is not a qdevolve lineage database")
            if not create:
                raise DatabaseError(f"{self.name}: holds no qdevolve database yet")
            return True
        with self._connect() as c:
            version = c.execute(select(func.max(S.schema_table.c.version))).scalar()
        if version is not None and version > S.SCHEMA_VERSION:
            raise DatabaseError(
                f"{self.name}: was written by a newer qdevolve (schema v{version}); upgrade qdevolve"
            )
        return False

    def _init_schema(self) -> None:
        from qdevolve import __version__

        with self._begin() as c:
            S.metadata.create_all(c)
            if c.execute(select(func.count()).select_from(S.schema_table)).scalar() == 0:
                c.execute(insert(S.schema_table).values(
                    version=S.SCHEMA_VERSION, qdevolve_version=__version__, created_at=time.time()))

    def _connect(self) -> Connection:
        """A pooled connection; a forked child drops the parent's pool first."""
        if os.getpid() != self._pid:
            self.engine.dispose(close=False)
            self._pid = os.getpid()
        return self.engine.connect()

    @contextlib.contextmanager
    def _begin(self) -> Iterator[Connection]:
        """A write transaction: ``BEGIN IMMEDIATE`` on SQLite, committed on success."""
        with self._connect() as c:
            c.execution_options(**{_WRITE_OPTION: True})
            with c.begin():
                yield c

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> LineageStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- runs -----------------------------------------------------------------------------
    def create_run(self, *, name: str | None = None, config: dict[str, Any] | None = None,
                   example_dir: str | None = None, seed: int | None = None,
                   run_id: str | None = None) -> str:
        run_id = run_id or new_id()
        now = time.time()
        with self._begin() as c:
            c.execute(insert(S.runs).values(
                id=run_id, name=name or run_id[:8], status="running", example_dir=example_dir,
                seed=seed, config=dumps(config or {}), created_at=now, updated_at=now))
        return run_id

    def update_run(self, run_id: str, **fields: Any) -> None:
        if "config" in fields:
            fields["config"] = dumps(fields["config"])
        fields["updated_at"] = time.time()
        with self._begin() as c:
            c.execute(update(S.runs).where(S.runs.c.id == run_id).values(**fields))

    def get_run(self, run_id: str) -> dict[str, Any]:
        with self._connect() as c:
            row = c.execute(select(S.runs).where(S.runs.c.id.startswith(run_id))).mappings().all()
        if not row:
            raise DatabaseError(f"{self.name}: no run with id {run_id!r}; see 'qdevolve runs list --db {self.name}'")
        if len(row) > 1:
            raise DatabaseError(f"{self.name}: run id prefix {run_id!r} is ambiguous")
        d = dict(row[0])
        d["config"] = loads(d["config"], {})
        return d

    def list_runs(self) -> list[dict[str, Any]]:
        """Every run with its program count, evaluation count and best score."""
        p, e = S.programs, S.evaluations
        n_prog = select(func.count()).where(p.c.run_id == S.runs.c.id).scalar_subquery()
        n_eval = select(func.count()).where(e.c.run_id == S.runs.c.id).scalar_subquery()
        best = select(func.max(e.c.score)).where(e.c.run_id == S.runs.c.id, e.c.status == "ok").scalar_subquery()
        q = select(S.runs, n_prog.label("programs"), n_eval.label("evaluations"), best.label("best_score")).order_by(S.runs.c.created_at)
        with self._connect() as c:
            return [dict(r) for r in c.execute(q).mappings()]

    def latest_run_id(self) -> str:
        with self._connect() as c:
            rid = c.execute(select(S.runs.c.id).order_by(S.runs.c.created_at.desc()).limit(1)).scalar()
        if rid is None:
            raise DatabaseError(f"{self.name}: holds no runs yet")
        return rid

    def resolve_run(self, run_id: str | None) -> str:
        return self.get_run(run_id)["id"] if run_id else self.latest_run_id()

    # -- run state (key/value, JSON) --------------------------------------------------------
    def set_state(self, run_id: str, key: str, value: Any) -> None:
        self.write(run_id=run_id, state={key: value})

    def get_state(self, run_id: str, key: str, default: Any = None) -> Any:
        with self._connect() as c:
            v = c.execute(select(S.run_state.c.value).where(
                S.run_state.c.run_id == run_id, S.run_state.c.key == key)).scalar()
        return default if v is None else loads(v)

    # -- batched writes ------------------------------------------------------------------
    def write(self, *, run_id: str | None = None,
              programs: Sequence[Program] = (),
              evaluations: Sequence[tuple[str, EvalResult] | tuple[str, EvalResult, str]] = (),
              edges: Sequence[tuple[str, str, str]] = (),
              events: Sequence[ArchiveEvent] = (),
              rollouts: Sequence[Rollout] = (),
              state: dict[str, Any] | None = None) -> None:
        """Store everything given in one transaction (all of it, or nothing on a crash).

        Args:
            run_id: Needed only for ``state``/``edges``; rows carry their own run id.
            programs: New programs; an edge is written for each parent (role ``crossover``
                for two or more parents, else ``mutation``; ``metadata["edge_role"]`` overrides).
            evaluations: ``(program_id, result[, sandbox_name])``.
            edges: Extra ``(parent_id, child_id, role)`` rows (e.g. ``inspiration``).
            events: Archive events.
            rollouts: Model completions.
            state: Run-state keys to upsert (JSON values).
        """
        now = time.time()
        prog_rows: list[tuple[Any, ...]] = []
        edge_rows: list[tuple[Any, ...]] = []
        run_of: dict[str, str] = {}
        for p in programs:
            if not p.run_id:
                raise ValueError(f"program {p.id} has no run_id")
            run_of[p.id] = p.run_id
            prog_rows.append((p.id, p.run_id, p.code, p.language, p.code_hash, p.generation,
                              p.island, p.operator, p.prompt_hash, p.policy_version,
                              p.created_at, dumps(p.metadata)))
            if p.parent_ids:
                role = p.metadata.get("edge_role") or ("crossover" if len(p.parent_ids) > 1 else "mutation")
                for i, parent in enumerate(p.parent_ids):
                    edge_rows.append((parent, p.id, role, i, p.run_id))
        for parent, child, role in edges:
            edge_rows.append((parent, child, role, 0, run_id or run_of.get(child, "")))
        eval_rows: list[tuple[Any, ...]] = []
        for item in evaluations:
            pid, r = item[0], item[1]
            sandbox = item[2] if len(item) > 2 else None
            score = r.score if r.score is None or math.isfinite(r.score) else None
            eval_rows.append((
                pid, run_of.get(pid) or run_id or "", r.status, score, dumps(r.metrics),
                None if r.tests is None else dumps(r.tests), dumps(r.features),
                dumps(r.artifacts), r.error, r.runtime_s, r.peak_memory_mb, sandbox, now))
        if any(not row[1] for row in eval_rows):
            eval_rows = self._fill_run_ids(eval_rows, 0, 1, "evaluation")
        event_rows = [(
            ev.run_id or run_of.get(ev.program_id) or run_id, ev.program_id, ev.archive, ev.island,
            ev.cell, ev.kind, ev.replaced_id, ev.score, dumps(ev.data), ev.created_at)
            for ev in events]
        if any(not row[0] for row in event_rows):
            event_rows = self._fill_run_ids(event_rows, 1, 0, "archive event")
        if any(not row[4] for row in edge_rows):
            edge_rows = self._fill_run_ids(edge_rows, 1, 4, "edge")
        rollout_rows = [(
            r.id, r.run_id or run_id, r.program_id, r.group_id, r.policy_version, r.prompt,
            r.completion, dumps(r.prompt_token_ids), dumps(r.token_ids), dumps(r.logprobs),
            r.reward, None if r.reward_vector is None else dumps(r.reward_vector), r.cluster_key,
            r.finish_reason, r.prompt_tokens, r.completion_tokens, r.created_at,
            dumps(r.metadata)) for r in rollouts]
        if state and not run_id:
            raise ValueError("write(state=...) needs run_id")
        with self._begin() as c:
            self._insert_many(c, S.programs, _PROGRAM_COLS, prog_rows)
            self._insert_many(c, S.edges, _EDGE_COLS, edge_rows)
            self._insert_many(c, S.evaluations, _EVAL_COLS, eval_rows)
            self._insert_many(c, S.archive_events, _EVENT_COLS, event_rows)
            self._insert_many(c, S.rollouts, _ROLLOUT_COLS, rollout_rows)
            if state:
                keys = list(state)
                c.execute(S.run_state.delete().where(S.run_state.c.run_id == run_id, S.run_state.c.key.in_(keys)))
                self._insert_many(c, S.run_state, _STATE_COLS,
                                  [(run_id, k, dumps(v), now) for k, v in state.items()])

    def _insert_many(self, c: Connection, table: Any, cols: tuple[str, ...],
                     rows: list[tuple[Any, ...]]) -> None:
        """``executemany`` of pre-built tuples straight on the driver (the fast path), or
        SQLAlchemy Core for drivers whose parameter style we do not spell ourselves."""
        if not rows:
            return
        mark = _MARKS.get(self.engine.dialect.paramstyle)
        if mark is None:
            c.execute(insert(table), [dict(zip(cols, r, strict=True)) for r in rows])
            return
        sql = f"INSERT INTO {table.name} ({', '.join(cols)}) VALUES ({', '.join([mark] * len(cols))})"
        c.exec_driver_sql(sql, rows)

    def _fill_run_ids(self, rows: list[tuple[Any, ...]], pid_at: int, run_at: int,
                      what: str) -> list[tuple[Any, ...]]:
        """Fill a missing run id from the program the row refers to (already stored)."""
        ids = sorted({r[pid_at] for r in rows if not r[run_at]})
        found: dict[str, str] = {}
        with self._connect() as c:
            for i in range(0, len(ids), 500):
                found.update(c.execute(select(S.programs.c.id, S.programs.c.run_id)
                                       .where(S.programs.c.id.in_(ids[i:i + 500]))).all())
        out = []
        for r in rows:
            if not r[run_at]:
                if r[pid_at] not in found:
                    raise DatabaseError(f"{self.name}: {what} for unknown program id {r[pid_at]}")
                r = (*r[:run_at], found[r[pid_at]], *r[run_at + 1:])
            out.append(r)
        return out

    def add_program(self, program: Program, result: EvalResult | None = None) -> None:
        self.write(programs=[program], evaluations=[(program.id, result)] if result else ())

    def add_evaluation(self, program_id: str, result: EvalResult, sandbox: str | None = None) -> None:
        self.write(evaluations=[(program_id, result, sandbox)] if sandbox else [(program_id, result)])

    def add_rollouts(self, rollouts: Sequence[Rollout]) -> None:
        self.write(rollouts=rollouts)

    def set_rollout_rewards(self, rewards: Iterable[tuple[str, float | None, list[float] | None, str | None]]) -> None:
        """Fill in ``(rollout_id, reward, reward_vector, cluster_key)`` once evaluated."""
        with self._begin() as c:
            for rid, reward, vec, key in rewards:
                c.execute(update(S.rollouts).where(S.rollouts.c.id == rid).values(
                    reward=reward, reward_vector=None if vec is None else dumps(vec), cluster_key=key))

    def add_policy_version(self, run_id: str, version: int, *, objective: str | None = None,
                           parent_version: int | None = None, step: int = 0,
                           path: str | None = None, metrics: dict[str, Any] | None = None,
                           state: dict[str, Any] | None = None) -> None:
        """Record a policy checkpoint (and, atomically, any run state such as trainer state)."""
        with self._begin() as c:
            c.execute(insert(S.policy_versions).values(
                run_id=run_id, version=version, parent_version=parent_version, objective=objective,
                step=step, path=path, metrics=dumps(metrics or {}), created_at=time.time()))
            if state:
                c.execute(S.run_state.delete().where(S.run_state.c.run_id == run_id, S.run_state.c.key.in_(list(state))))
                c.execute(insert(S.run_state), [{"run_id": run_id, "key": k, "value": dumps(v),
                                                 "updated_at": time.time()} for k, v in state.items()])

    def add_plugin_file(self, run_id: str, path: str, sha256: str, names: Sequence[Sequence[str]] = ()) -> None:
        with self._begin() as c:
            c.execute(insert(S.plugin_files).values(run_id=run_id, path=path, sha256=sha256,
                                                    names=dumps([list(n) for n in names]), loaded_at=time.time()))

    # -- reads ----------------------------------------------------------------------------
    @staticmethod
    def _program(row: Any, parents: Sequence[str] = ()) -> Program:
        return Program(
            id=row.id, run_id=row.run_id, code=row.code, language=row.language,
            parent_ids=tuple(parents), generation=row.generation, island=row.island,
            operator=row.operator, prompt_hash=row.prompt_hash, policy_version=row.policy_version,
            created_at=row.created_at, code_hash=row.code_hash, metadata=loads(row.metadata, {}))

    @staticmethod
    def _result(row: Any) -> EvalResult:
        return EvalResult(
            status=row.status, score=row.score, metrics=loads(row.metrics, {}),
            tests=loads(row.tests), features=loads(row.features, {}),
            artifacts=loads(row.artifacts, {}), error=row.error, runtime_s=row.runtime_s,
            peak_memory_mb=row.peak_memory_mb)

    def _parents_of(self, c: Any, ids: Sequence[str]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for i in range(0, len(ids), 500):
            q = (select(S.edges.c.child_id, S.edges.c.parent_id)
                 .where(S.edges.c.child_id.in_(ids[i:i + 500]), S.edges.c.role != "inspiration")
                 .order_by(S.edges.c.child_id, S.edges.c.position))
            for child, parent in c.execute(q):
                out.setdefault(child, []).append(parent)
        return out

    def resolve_program_id(self, program_id: str) -> str:
        """The full id of a program given its id or a unique prefix."""
        pr = S.programs
        with self._connect() as c:
            if c.execute(select(pr.c.id).where(pr.c.id == program_id)).first():
                return program_id
            ids = c.execute(select(pr.c.id).where(pr.c.id.startswith(program_id, autoescape=True))
                            .limit(2)).scalars().all()
        if not ids:
            raise DatabaseError(f"{self.name}: no program with id {program_id!r}")
        if len(ids) > 1:
            raise DatabaseError(f"{self.name}: program id prefix {program_id!r} is ambiguous")
        return ids[0]

    def get_program(self, program_id: str) -> Program:
        with self._connect() as c:
            rows = c.execute(select(S.programs).where(S.programs.c.id == program_id)).all()
            if not rows:
                rows = c.execute(select(S.programs).where(
                    S.programs.c.id.startswith(program_id, autoescape=True)).limit(2)).all()
            if not rows:
                raise DatabaseError(f"{self.name}: no program with id {program_id!r}")
            if len(rows) > 1:
                raise DatabaseError(f"{self.name}: program id prefix {program_id!r} is ambiguous")
            parents = self._parents_of(c, [rows[0].id]).get(rows[0].id, [])
        return self._program(rows[0], parents)

    def get_evaluation(self, program_id: str) -> EvalResult | None:
        """The latest evaluation of a program, or ``None``."""
        with self._connect() as c:
            row = c.execute(select(S.evaluations).where(S.evaluations.c.program_id == program_id)
                            .order_by(S.evaluations.c.id.desc()).limit(1)).first()
        return None if row is None else self._result(row)

    _EVAL_COLUMNS = ("status", "score", "metrics", "tests", "features", "artifacts", "error",
                     "runtime_s", "peak_memory_mb")

    def _stream(self, query: Any, key: str, start: Any) -> Iterator[tuple[int, Program, EvalResult | None]]:
        """Page through ``query(after)`` (programs joined with one evaluation) by ``key``."""
        after = start
        while True:
            with self._connect() as c:
                rows = c.execute(query(after)).all()
                parents = self._parents_of(c, [r.id for r in rows])
            if not rows:
                return
            for r in rows:
                res = None if r.eval_id is None else self._result(r)
                yield r.seq, self._program(r, parents.get(r.id, [])), res
            after = getattr(rows[-1], key)

    def iter_programs(self, run_id: str, *, after_seq: int = 0, batch: int = 5000) -> Iterator[tuple[int, Program, EvalResult | None]]:
        """``(seq, program, latest evaluation)`` in insertion order, streamed in batches."""
        p, e = S.programs, S.evaluations
        e2 = e.alias("e2")
        latest = select(func.max(e2.c.id)).where(e2.c.program_id == p.c.id).correlate(p).scalar_subquery()
        cols = [e.c[n] for n in self._EVAL_COLUMNS] + [e.c.id.label("eval_id")]
        return self._stream(lambda after: (
            select(p, *cols).select_from(p.outerjoin(e, e.c.id == latest))
            .where(p.c.run_id == run_id, p.c.seq > after).order_by(p.c.seq).limit(batch)), "seq", after_seq)

    def iter_evaluated(self, run_id: str, *, batch: int = 5000) -> Iterator[tuple[int, Program, EvalResult]]:
        """``(seq, program, latest evaluation)`` of evaluated programs in *evaluation* order.

        This is the order the engine called ``archive.add`` in (with several workers
        evaluations finish out of program order), so replaying it rebuilds the same archive.
        """
        p, e = S.programs, S.evaluations
        e2 = e.alias("e2")
        latest = select(func.max(e2.c.id)).where(e2.c.program_id == e.c.program_id).correlate(e).scalar_subquery()
        cols = [e.c[n] for n in self._EVAL_COLUMNS] + [e.c.id.label("eval_id")]
        return self._stream(lambda after: (
            select(p, *cols).select_from(e.join(p, p.c.id == e.c.program_id))
            .where(e.c.run_id == run_id, e.c.id > after, e.c.id == latest).order_by(e.c.id).limit(batch)),
            "eval_id", 0)  # type: ignore[return-value]

    def count_programs(self, run_id: str) -> int:
        with self._connect() as c:
            return c.execute(select(func.count()).select_from(S.programs).where(S.programs.c.run_id == run_id)).scalar() or 0

    def count_evaluations(self, run_id: str) -> int:
        """Programs of the run that have at least one evaluation."""
        with self._connect() as c:
            return c.execute(select(func.count(func.distinct(S.evaluations.c.program_id))).where(
                S.evaluations.c.run_id == run_id)).scalar() or 0

    def unevaluated(self, run_id: str) -> list[Program]:
        """Programs stored without an evaluation (evaluated on resume)."""
        p, e = S.programs, S.evaluations
        q = (select(p).where(p.c.run_id == run_id, ~select(e.c.id).where(e.c.program_id == p.c.id).exists())
             .order_by(p.c.seq))
        with self._connect() as c:
            rows = c.execute(q).all()
            parents = self._parents_of(c, [r.id for r in rows])
        return [self._program(r, parents.get(r.id, [])) for r in rows]

    def code_hashes(self, run_id: str) -> list[str]:
        """Code hashes of the run's programs, failed mutations (empty code) excluded."""
        p = S.programs
        with self._connect() as c:
            return [h for (h,) in c.execute(select(p.c.code_hash).where(p.c.run_id == run_id, p.c.code != ""))]

    def find_code_hash(self, run_id: str, code_hash: str) -> str | None:
        with self._connect() as c:
            return c.execute(select(S.programs.c.id).where(
                S.programs.c.run_id == run_id, S.programs.c.code_hash == code_hash).limit(1)).scalar()

    def archive_events(self, run_id: str, archive: str | None = None) -> list[ArchiveEvent]:
        a = S.archive_events
        q = select(a).where(a.c.run_id == run_id).order_by(a.c.id)
        if archive:
            q = q.where(a.c.archive == archive)
        with self._connect() as c:
            return [ArchiveEvent(program_id=r.program_id, kind=r.kind, archive=r.archive, island=r.island,
                                 cell=r.cell, replaced_id=r.replaced_id, score=r.score,
                                 data=loads(r.data, {}), run_id=r.run_id, created_at=r.created_at)
                    for r in c.execute(q)]

    def rollouts(self, run_id: str, *, policy_version: int | None = None, after_seq: int = 0,
                 evaluated_only: bool = False, limit: int | None = None) -> list[tuple[int, Rollout]]:
        """``(seq, rollout)`` rows in insertion order."""
        r = S.rollouts
        q = select(r).where(r.c.run_id == run_id, r.c.seq > after_seq).order_by(r.c.seq)
        if policy_version is not None:
            q = q.where(r.c.policy_version == policy_version)
        if evaluated_only:
            q = q.where(r.c.reward.is_not(None))
        if limit:
            q = q.limit(limit)
        with self._connect() as c:
            return [(row.seq, Rollout(
                id=row.id, run_id=row.run_id, program_id=row.program_id, group_id=row.group_id,
                policy_version=row.policy_version, prompt=row.prompt, completion=row.completion,
                prompt_token_ids=loads(row.prompt_token_ids, []), token_ids=loads(row.token_ids, []),
                logprobs=loads(row.logprobs, []), reward=row.reward,
                reward_vector=loads(row.reward_vector), cluster_key=row.cluster_key,
                finish_reason=row.finish_reason, prompt_tokens=row.prompt_tokens,
                completion_tokens=row.completion_tokens, created_at=row.created_at,
                metadata=loads(row.metadata, {}))) for row in c.execute(q)]

    def policy_versions(self, run_id: str) -> list[dict[str, Any]]:
        pv = S.policy_versions
        with self._connect() as c:
            rows = c.execute(select(pv).where(pv.c.run_id == run_id).order_by(pv.c.version)).mappings().all()
        return [{**dict(r), "metrics": loads(r["metrics"], {})} for r in rows]

    def latest_policy_version(self, run_id: str) -> dict[str, Any] | None:
        rows = self.policy_versions(run_id)
        return rows[-1] if rows else None

    def plugin_files(self, run_id: str) -> list[dict[str, Any]]:
        pf = S.plugin_files
        with self._connect() as c:
            return [dict(r) for r in c.execute(select(pf).where(pf.c.run_id == run_id).order_by(pf.c.id)).mappings()]

    def execute(self, sql: str, **params: Any) -> list[Any]:
        """Run a read-only SQL query (for views and power users)."""
        with self._connect() as c:
            return c.execute(text(sql), params).all()


def open_store(target: str | Path, *, create: bool = False) -> LineageStore:
    """Open an existing database (``create=False``) or create one."""
    return LineageStore(target, create=create)
