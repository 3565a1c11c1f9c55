"""The lineage store: every program, edge, evaluation, archive event, rollout and policy
version of every run, in SQLite (embedded default, WAL) or PostgreSQL.

The database *is* the checkpoint: archives, islands, feature ranges, random state and
trainer state are rebuilt from it on resume. Writes are batched: :meth:`LineageStore.write`
stores any mix of rows in one transaction, so a process killed mid-batch leaves either the
whole batch or none of it. Rows are built by one mapper per table (``_rows.py``), values
encoded by ``_codec.py`` (never raising on NaN/inf, numpy values or lone surrogates), the
engine set up by ``_engine.py``, and one writer per run is enforced by :class:`RunLease`.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, create_engine, func, insert, or_, select, text, update
from sqlalchemy.engine import make_url

from qdevolve.db import _engine, _open, _queries, _rows, claims, snapshots, templates
from qdevolve.db import schema as S
from qdevolve.db._codec import dumps, finite_or_none, loads
from qdevolve.db._codec import text as text_col
from qdevolve.db._lease import RunLease, RunLocked
from qdevolve.db.records import EdgeRecord, EvaluationRecord, RewardRecord, RunCounts, as_reward
from qdevolve.errors import DatabaseError
from qdevolve.types import ArchiveEvent, EvalResult, Program, PromptTemplate, Rollout, new_id

__all__ = ["LineageStore", "open_store", "dumps", "loads", "RunLease", "RunLocked", "BudgetSpent"]


class BudgetSpent(DatabaseError):
    """:meth:`LineageStore.write` with ``budget=`` found the counter full: nothing was stored."""

MIGRANT_PREFIX = "migrant/"  # + program id, a pool's published migrant (qdevolve.archive.islands_pool)
_FOREVER = 1e12  # a migrant's claim never expires
_MARKS = {"qmark": "?", "format": "%s", "pyformat": "%s"}


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
            self.name = _open.display_target(self.target)
            self.path: Path | None = None
            from qdevolve.db._untrusted import pg_read_options

            bound = pg_read_options() if make_url(self.target).get_backend_name() == "postgresql" else ""
            self.engine = create_engine(self.target, pool_pre_ping=True,
                                        **({"connect_args": {"options": bound}} if bound else {}))
            needs_init = _engine.url_needs_init(self.engine, self.name, create)
        else:
            self.path = Path(self.target)
            self.name = self.target
            needs_init = _open.check_sqlite_file(self.path, create=create)
            if needs_init:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self.engine = _engine.sqlite_engine(self.path)
        if needs_init:
            with self._begin() as c:
                _engine.init_schema(c)
        else:
            with self._connect() as c:
                old = _engine.schema_version(c) < S.SCHEMA_VERSION
            if old and self.path is not None and _engine.read_only_file(self.path):
                raise DatabaseError(f"{self.name}: read-only database of an older schema; copy it somewhere "
                                    f"writable once so qdevolve can upgrade it")
            if old:
                with self._begin() as c:
                    _engine.migrate(c)

    # -- connections -----------------------------------------------------------------------
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
            c.execution_options(**{_engine.WRITE_OPTION: True})
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
                id=run_id, name=text_col(name or run_id[:8]), status="running", example_dir=text_col(example_dir),
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
        with self._connect() as c:
            return [dict(r) for r in c.execute(_queries.runs_overview()).mappings()]

    def latest_run_id(self) -> str:
        with self._connect() as c:
            rid = c.execute(select(S.runs.c.id).order_by(S.runs.c.created_at.desc()).limit(1)).scalar()
        if rid is None:
            raise DatabaseError(f"{self.name}: holds no runs yet")
        return rid

    def resolve_run(self, run_id: str | None) -> str:
        return self.get_run(run_id)["id"] if run_id else self.latest_run_id()

    def lease(self, run_id: str, **kw: Any) -> RunLease:
        """The run's writer lease (not yet acquired): ``with store.lease(run_id): ...``.

        Acquiring raises :class:`RunLocked` (exit 2) while another live process holds it.
        """
        return RunLease(self._begin, run_id, self.name, **kw)

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
              evaluations: Sequence[EvaluationRecord | tuple[Any, ...]] = (),
              edges: Sequence[EdgeRecord | tuple[str, str, str]] = (),
              events: Sequence[ArchiveEvent] = (),
              rollouts: Sequence[Rollout] = (),
              rewards: Sequence[RewardRecord] = (),
              state: dict[str, Any] | None = None,
              budget: tuple[str, int, int] | None = None, snapshot: str | None = None,
              templates: Sequence[PromptTemplate] = ()) -> None:
        """Store everything given in one transaction (all of it, or nothing on a crash).

        Args:
            run_id: Needed for ``state``; other rows carry their run id or take their program's.
            programs: New programs; an edge is written for each parent (role ``crossover``
                for two or more parents, else ``mutation``; ``metadata["edge_role"]`` overrides).
            evaluations: :class:`EvaluationRecord` (or a ``(program_id, result[, sandbox])`` tuple).
            edges: Extra :class:`EdgeRecord` rows, e.g. ``inspiration`` (or ``(parent, child, role)``).
            events: Archive events.
            rollouts: Model completions (with their reward, when known).
            rewards: Rewards of rollouts stored earlier.
            state: Run-state keys to upsert (JSON values).
            budget: ``(counter, n, total)``: claim ``n`` units of the budget counter
                ``counter`` (a run id, or a pool shared by several runs; see
                :mod:`qdevolve.db.claims`) in this same transaction, so the claim commits or
                rolls back with the rows it pays for. Several controllers on one database
                can never store more than ``total`` children between them.
            snapshot: The run's archive state after this batch's evaluation (encoded by
                :mod:`qdevolve.archive.snapshot`), stored in this same transaction.
            templates: New prompt templates of run ``run_id`` (:mod:`qdevolve.db.templates`).

        Raises:
            BudgetSpent: the claim would pass ``total`` (or the counter does not exist);
                nothing of the batch is stored.
        """
        batch = self._resolve(run_id=run_id, programs=programs, evaluations=evaluations, edges=edges,
                              events=events, rollouts=rollouts, rewards=rewards, state=state, budget=budget,
                              snapshot=snapshot, templates=templates)
        with self._begin() as c:
            self._write_batch(c, batch)

    def _resolve(self, *, run_id: str | None = None, programs: Sequence[Program] = (),
                 evaluations: Sequence[EvaluationRecord | tuple[Any, ...]] = (),
                 edges: Sequence[EdgeRecord | tuple[str, str, str]] = (), events: Sequence[ArchiveEvent] = (),
                 rollouts: Sequence[Rollout] = (), rewards: Sequence[RewardRecord] = (),
                 state: dict[str, Any] | None = None, budget: tuple[str, int, int] | None = None,
                 snapshot: str | None = None, templates: Sequence[PromptTemplate] = ()) -> dict[str, Any]:
        """A :meth:`write` batch checked and resolved (parent edges, evaluation run ids) before
        its transaction opens."""
        if (state or snapshot or templates) and not run_id:
            raise ValueError("write(state=..., snapshot=..., templates=...) needs run_id")
        edge_recs, evals = _rows.resolve_batch(programs, evaluations, edges, events, run_id,
                                               self._run_ids_of, self.name)
        return {"run_id": run_id, "programs": programs, "edges": edge_recs, "evaluations": evals,
                "events": events, "rollouts": rollouts, "rewards": rewards, "state": state,
                "budget": budget, "snapshot": snapshot, "templates": templates}

    def _write_batch(self, c: Connection, b: dict[str, Any]) -> None:
        """One resolved batch inside the open transaction ``c`` (see :meth:`write`)."""
        run_id, budget = b["run_id"], b["budget"]
        ctx = {"now": time.time(), "run_id": run_id or ""}
        if budget is not None and not claims.take_budget(c, budget[0], budget[1], budget[2]):
            raise BudgetSpent(f"{self.name}: budget counter {budget[0]!r} has no {budget[1]} "
                              f"unit(s) left of {budget[2]}")
        self._insert(c, _rows.PROGRAM, b["programs"], ctx)
        self._insert(c, _rows.EDGE, b["edges"], ctx)
        self._insert(c, _rows.EVALUATION, b["evaluations"], ctx)
        self._insert(c, _rows.EVENT, b["events"], ctx)
        self._insert(c, _rows.ROLLOUT, b["rollouts"], ctx)
        for r in map(as_reward, b["rewards"]):
            c.execute(update(S.rollouts).where(S.rollouts.c.id == r.rollout_id).values(
                reward=finite_or_none(r.reward), cluster_key=text_col(r.cluster_key),
                reward_vector=None if r.reward_vector is None else dumps(r.reward_vector)))
        if b["state"]:
            self._upsert_state(c, [_rows.STATE.to_row(kv, ctx) for kv in b["state"].items()])
        if b["snapshot"] is not None:
            snapshots.write_snapshot(c, run_id or "", b["snapshot"])
        self._insert(c, templates.TEMPLATE, b.get("templates", ()), ctx)

    # -- starting and (re)opening a run, each one transaction --------------------------------
    def start_run(self, run_id: str, *, name: str | None = None, config: dict[str, Any] | None = None,
                  example_dir: str | None = None, seed: int | None = None,
                  plugin_files: Sequence[tuple[str, str, Sequence[Sequence[str]]]] = (),
                  budget: tuple[str, int] | None = None, batches: Sequence[dict[str, Any]] = ()) -> str:
        """Create run ``run_id`` with everything its start stores, in **one** transaction: the
        run row, its ``--plugin`` files ``(path, sha256, names)``, its budget counter
        ``(counter, stored)`` (created unless it exists, :func:`qdevolve.db.claims.init_budget`)
        and ``batches``, each the keyword arguments of one :meth:`write` (the seeds, their
        evaluations, archive events and the run state), written in order.

        A process killed at any moment leaves no run or the whole started one.

        Raises:
            DatabaseError: a run with this id exists already (nothing is written).
        """
        resolved = [self._resolve(**b) for b in batches]
        now = time.time()
        with self._begin() as c:
            if c.execute(select(S.runs.c.id).where(S.runs.c.id == run_id)).first() is not None:
                raise DatabaseError(f"{self.name}: a run with id {run_id!r} exists already")
            c.execute(insert(S.runs).values(
                id=run_id, name=text_col(name or run_id[:8]), status="running", example_dir=text_col(example_dir),
                seed=seed, config=dumps(config or {}), created_at=now, updated_at=now))
            for path, sha256, names in plugin_files:
                c.execute(insert(S.plugin_files).values(run_id=run_id, path=text_col(path), sha256=sha256,
                                                        names=dumps([list(n) for n in names]), loaded_at=now))
            if budget is not None:
                claims.init_budget(c, budget[0], budget[1])
            for b in resolved:
                self._write_batch(c, b)
        return run_id

    def open_run(self, run_id: str, *, state: dict[str, Any] | None = None,
                 budget: tuple[str, int] | None = None, reconcile: bool = False) -> None:
        """Mark run ``run_id`` running as its writer begins (start or resume), in one
        transaction: its status, the run-state keys ``state``, its budget counter ``(counter,
        stored)`` created unless it exists, and with ``reconcile`` the run's own counter set to
        its stored children (:func:`qdevolve.db.claims.reconcile_budget`, under the run lease)."""
        now = time.time()
        with self._begin() as c:
            c.execute(update(S.runs).where(S.runs.c.id == run_id).values(status="running", updated_at=now))
            if state:
                self._upsert_state(c, [_rows.STATE.to_row(kv, {"now": now, "run_id": run_id})
                                       for kv in state.items()])
            if budget is not None:
                claims.init_budget(c, budget[0], budget[1])
            if reconcile:
                claims.reconcile_budget(c, run_id)

    def _upsert_state(self, c: Connection, rows: list[dict[str, Any]]) -> None:
        """The one way run-state keys are written: ``INSERT ... ON CONFLICT (run_id, key) DO
        UPDATE``, race-free when two writers set one key at once (a delete-then-insert lets
        both deletes pass on PostgreSQL, and the second insert then fails on the primary key)."""
        dialect = self.engine.dialect.name
        if dialect in ("postgresql", "sqlite"):
            if dialect == "postgresql":
                from sqlalchemy.dialects.postgresql import insert as dialect_insert
            else:
                from sqlalchemy.dialects.sqlite import insert as dialect_insert
            stmt = dialect_insert(S.run_state)
            c.execute(stmt.on_conflict_do_update(
                index_elements=[S.run_state.c.run_id, S.run_state.c.key],
                set_={"value": stmt.excluded.value, "updated_at": stmt.excluded.updated_at}), rows)
            return
        rs = S.run_state
        for row in rows:  # other dialects: update, else insert (one writer per run: the lease)
            done = c.execute(update(rs).where(rs.c.run_id == row["run_id"], rs.c.key == row["key"])
                             .values(value=row["value"], updated_at=row["updated_at"]))
            if not done.rowcount:
                c.execute(insert(rs), row)

    # -- migration between the runs of a pool (qdevolve.archive.islands_pool) ---------------
    def publish_migrants(self, pool: str, run_id: str, migrants: dict[str, dict[str, Any]],
                         migration: dict[str, Any]) -> None:
        """Publish ``migrants`` (program id -> info) under the pool's ``migrant/<id>`` keys and
        the run's ``migration`` state, in one transaction."""
        ctx = {"now": time.time(), "run_id": run_id}
        with self._begin() as c:
            self._upsert_state(c, [_rows.STATE.to_row((MIGRANT_PREFIX + pid, info), {**ctx, "run_id": pool})
                                   for pid, info in migrants.items()])
            self._upsert_state(c, [_rows.STATE.to_row(("migration", migration), ctx)])

    def pool_migrants(self, pool: str) -> tuple[dict[str, dict[str, Any]], dict[str, str | None]]:
        """The pool's published migrants (program id -> info, in key order) and who claimed
        each one taken so far (program id -> controller)."""
        rs = S.run_state
        with self._connect() as c:
            rows = c.execute(select(rs.c.key, rs.c.value).where(
                rs.c.run_id == pool, or_(rs.c.key.like(MIGRANT_PREFIX + "%"),
                                         rs.c.key.like(claims.CLAIM_PREFIX + "%"))).order_by(rs.c.key)).all()
        migrants = {k[len(MIGRANT_PREFIX):]: loads(v) for k, v in rows if k.startswith(MIGRANT_PREFIX)}
        taken = {k[len(claims.CLAIM_PREFIX):]: loads(v).get("controller") for k, v in rows
                 if k.startswith(claims.CLAIM_PREFIX)}
        return migrants, taken

    def take_migrant(self, pool: str, program_id: str, controller: str, *, run_id: str,
                     events: Sequence[ArchiveEvent] = (), state: dict[str, Any] | None = None) -> bool:
        """Claim the pool's migrant ``program_id`` for ``controller`` and store what taking it
        implies (the taker's archive ``events`` and run-state keys ``state``) in **one**
        transaction. True when the migrant is ours (a claim we made, or ours from before);
        False when another controller holds it: then nothing is written. The claim never
        expires: the migrant was delivered with it."""
        batch = self._resolve(run_id=run_id, events=events, state=state)
        with self._begin() as c:
            if not claims.claim_program(c, pool, program_id, controller, lease_s=_FOREVER):
                return False
            self._write_batch(c, batch)
        return True

    def init_budget(self, counter: str, stored: int) -> None:
        """Create the budget counter ``counter`` with ``stored`` units unless it exists (a run's
        start and resume; see :mod:`qdevolve.db.claims`)."""
        with self._begin() as c:
            claims.init_budget(c, counter, stored)

    def reconcile_budget(self, run_id: str) -> tuple[int | None, int]:  # claims.reconcile_budget
        with self._begin() as c:
            return claims.reconcile_budget(c, run_id)

    def budget_stored(self, counter: str) -> int | None:
        """Units the budget counter has counted (``None`` before :meth:`init_budget`)."""
        with self._connect() as c:
            return claims.budget_stored(c, counter)

    def _insert(self, c: Connection, mapper: _rows.Mapper[Any], items: Sequence[Any], ctx: dict[str, Any]) -> None:
        """``executemany`` of the mapper's rows straight on the driver (the fast path), or
        SQLAlchemy Core for drivers whose parameter style we do not spell ourselves."""
        if not items:
            return
        rows, cols = mapper.rows(items, ctx), mapper.columns
        mark = _MARKS.get(self.engine.dialect.paramstyle)
        if mark is None:
            c.execute(insert(mapper.table), [dict(zip(cols, r, strict=True)) for r in rows])
            return
        sql = f"INSERT INTO {mapper.table.name} ({', '.join(cols)}) VALUES ({', '.join([mark] * len(cols))})"
        c.exec_driver_sql(sql, rows)

    def _run_ids_of(self, program_ids: Iterable[str]) -> dict[str, str]:
        ids, found = sorted(program_ids), {}
        with self._connect() as c:
            for i in range(0, len(ids), 500):
                found.update(c.execute(select(S.programs.c.id, S.programs.c.run_id)
                                       .where(S.programs.c.id.in_(ids[i:i + 500]))).all())
        return found

    def add_program(self, program: Program, result: EvalResult | None = None) -> None:
        self.write(programs=[program], evaluations=[EvaluationRecord(program.id, result)] if result else ())

    def add_evaluation(self, program_id: str, result: EvalResult, sandbox: str | None = None,
                       worker: str | None = None) -> None:
        self.write(evaluations=[EvaluationRecord(program_id, result, sandbox, worker)])

    def set_rollout_rewards(self, rewards: Iterable[RewardRecord | tuple[Any, ...]]) -> None:
        """Fill in rewards (:class:`RewardRecord` or ``(rollout_id, reward, vector, key)``)."""
        self.write(rewards=list(rewards))

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
                ctx = {"now": time.time(), "run_id": run_id}
                self._upsert_state(c, [_rows.STATE.to_row(kv, ctx) for kv in state.items()])

    def record_policy_eval(self, run_id: str, version: int, key: str, results: dict[str, Any]) -> None:
        """Store an evaluation of a policy version (``eval-policy``) under ``metrics["evals"][key]``.

        ``key`` names the setting (task, split, samples, seed); a later evaluation with the same
        key replaces it, others are kept. The row is read and rewritten in one transaction.

        Raises:
            DatabaseError: the run has no such version.
        """
        pv = S.policy_versions
        where = (pv.c.run_id == run_id) & (pv.c.version == version)
        with self._begin() as c:
            row = c.execute(select(pv.c.metrics).where(where)).first()
            if row is None:
                raise DatabaseError(f"{self.name}: run {run_id[:12]} has no policy version {version}")
            metrics = loads(row[0], {})
            metrics = metrics if isinstance(metrics, dict) else {}
            evals = metrics.get("evals") if isinstance(metrics.get("evals"), dict) else {}
            metrics["evals"] = {**evals, key: results}
            c.execute(update(pv).where(where).values(metrics=dumps(metrics)))

    def add_plugin_file(self, run_id: str, path: str, sha256: str, names: Sequence[Sequence[str]] = ()) -> None:
        with self._begin() as c:
            c.execute(insert(S.plugin_files).values(run_id=run_id, path=text_col(path), sha256=sha256,
                                                    names=dumps([list(n) for n in names]), loaded_at=time.time()))

    # -- reads ----------------------------------------------------------------------------
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
        """A program by id or unique prefix, with its parents."""
        pid = self.resolve_program_id(program_id)
        with self._connect() as c:
            row = c.execute(select(S.programs).where(S.programs.c.id == pid)).one()
            parents = _queries.parents_of(c, [pid]).get(pid, [])
        return _rows.program_from_row(row, parents)

    def get_evaluation(self, program_id: str) -> EvalResult | None:
        """The latest evaluation of a program, or ``None``."""
        with self._connect() as c:
            row = c.execute(select(S.evaluations).where(S.evaluations.c.program_id == program_id)
                            .order_by(S.evaluations.c.id.desc()).limit(1)).first()
        return None if row is None else _rows.result_from_row(row)

    def _stream(self, query: Any, key: str, start: Any) -> Iterator[tuple[int, Program, EvalResult | None]]:
        """Page through ``query(after)`` (programs joined with one evaluation) by ``key``."""
        after = start
        while True:
            with self._connect() as c:
                rows = c.execute(query(after)).all()
                parents = _queries.parents_of(c, [r.id for r in rows])
            if not rows:
                return
            for r in rows:
                res = None if r.eval_id is None else _rows.result_from_row(r)
                yield r.seq, _rows.program_from_row(r, parents.get(r.id, [])), res
            after = getattr(rows[-1], key)

    def iter_programs(self, run_id: str, *, after_seq: int = 0,
                      batch: int = 5000) -> Iterator[tuple[int, Program, EvalResult | None]]:
        """``(seq, program, latest evaluation)`` in insertion order, streamed in batches."""
        return self._stream(lambda after: _queries.programs_with_latest(run_id, after, batch), "seq", after_seq)

    def iter_evaluated(self, run_id: str, *, batch: int = 5000) -> Iterator[tuple[int, Program, EvalResult]]:
        """``(seq, program, latest evaluation)`` of evaluated programs in *evaluation* order.

        This is the order the engine called ``archive.add`` in (with several workers
        evaluations finish out of program order), so replaying it rebuilds the same archive.
        """
        return self._stream(lambda after: _queries.evaluated_in_order(run_id, after, batch),  # type: ignore[return-value]
                            "eval_id", 0)

    def run_counts(self, run_id: str) -> RunCounts:
        """Children, evaluated children, status counts, seed and best score (the ledger's start)."""
        with self._connect() as c:
            return _queries.run_counts(c, run_id)

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
        with self._connect() as c:
            rows = c.execute(_queries.unevaluated(run_id)).all()
            parents = _queries.parents_of(c, [r.id for r in rows])
        return [_rows.program_from_row(r, parents.get(r.id, [])) for r in rows]

    def count_evaluations_after(self, run_id: str, eval_id: int) -> int:
        """Evaluations of the run stored after evaluation ``eval_id`` (a snapshot's tail)."""
        e = S.evaluations
        with self._connect() as c:
            return int(c.execute(select(func.count()).select_from(e).where(
                e.c.run_id == run_id, e.c.id > eval_id)).scalar() or 0)

    def status_counts(self, run_id: str, *, up_to_eval: int | None = None) -> dict[str, int]:
        """Evaluations of the run by stored status (those with id ``<= up_to_eval`` when given)."""
        return self._count_by(S.evaluations, "status", run_id, up_to_eval)

    def event_kind_counts(self, run_id: str, *, up_to_event: int | None = None) -> dict[str, int]:
        """Archive events of the run by kind (those with id ``<= up_to_event`` when given)."""
        return self._count_by(S.archive_events, "kind", run_id, up_to_event)

    def _count_by(self, table: Any, column: str, run_id: str, up_to: int | None) -> dict[str, int]:
        key = table.c[column]
        q = select(key, func.count()).where(table.c.run_id == run_id).group_by(key)
        if up_to is not None:
            q = q.where(table.c.id <= up_to)
        with self._connect() as c:
            return {str(k): int(n) for k, n in c.execute(q)}

    def _has_worker_column(self) -> bool:
        from sqlalchemy import inspect

        return "worker" in {col["name"] for col in inspect(self.engine).get_columns("evaluations")}

    def evaluations_by_worker(self, run_id: str) -> dict[str, int] | None:
        """Evaluations of the run per worker (``"-"``: none recorded), most first; ``None`` on
        schemas without ``evaluations.worker``."""
        if not self._has_worker_column():
            return None
        e = S.evaluations
        n = func.count().label("n")
        with self._connect() as c:
            rows = c.execute(select(e.c.worker, n).where(e.c.run_id == run_id)
                             .group_by(e.c.worker).order_by(n.desc())).all()
        return {str(w) if w is not None else "-": int(k) for w, k in rows}

    def latest_worker(self, program_id: str) -> str | None:
        """Where the program's latest evaluation ran; ``None`` when unknown (or on schemas
        without ``evaluations.worker``)."""
        if not self._has_worker_column():
            return None
        e = S.evaluations
        with self._connect() as c:
            return c.execute(select(e.c.worker).where(e.c.program_id == program_id)
                             .order_by(e.c.id.desc()).limit(1)).scalar()

    def programs_per_policy(self, run_id: str) -> dict[int, int]:
        """Programs of the run per policy version that generated them (unversioned left out)."""
        p = S.programs
        with self._connect() as c:
            rows = c.execute(select(p.c.policy_version, func.count()).where(
                p.c.run_id == run_id, p.c.policy_version.is_not(None)).group_by(p.c.policy_version)).all()
        return {int(v): int(n) for v, n in rows}

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
            return [_rows.event_from_row(r) for r in c.execute(q)]

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
            return [(row.seq, _rows.rollout_from_row(row)) for row in c.execute(q)]

    def policy_versions(self, run_id: str) -> list[dict[str, Any]]:
        pv = S.policy_versions
        with self._connect() as c:
            rows = c.execute(select(pv).where(pv.c.run_id == run_id).order_by(pv.c.version)).mappings().all()
        return [{**dict(r), "metrics": loads(r["metrics"], {})} for r in rows]

    def latest_policy_version(self, run_id: str) -> dict[str, Any] | None:
        rows = self.policy_versions(run_id)
        return rows[-1] if rows else None

    def prompt_templates(self, run_id: str) -> list[PromptTemplate]:
        """The run's prompt templates in creation order (:mod:`qdevolve.db.templates`)."""
        with self._connect() as c:
            return templates.read_templates(c, run_id)

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
