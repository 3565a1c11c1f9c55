"""The evolution engine as ask/tell: breeder -> executor -> ``tell`` -> store and archive.

* *ask*: the :class:`~qdevolve.evolve.core.breeder.Breeder` turns (rng, archive, selection,
  operators) into a child plan; the operator proposes the children (model calls are asyncio
  tasks, so generation overlaps evaluation);
* the *executor* plugin (``local`` threads, ``ray``...) places each child's evaluation;
* :meth:`Evolution.tell` builds a :class:`~qdevolve.evolve.core.record.TellRecord` (program,
  evaluation, archive events, rollout with the reward, run state), commits it in **one
  transaction**, then applies it to memory (the :class:`~qdevolve.evolve.report.ledger.RunLedger`,
  caches, observers);
* a short loop (``loop.py``) only manages concurrency.

A program is stored only together with its evaluation, so a run killed at any moment (even
inside ``tell``) leaves whole children or none: resume rebuilds the archive from the newest
archive snapshot plus the evaluations stored after it (the path ``qdevolve archive stats``
takes, :mod:`qdevolve.evolve.core.archive_rebuild`), rebuilds the ledger, and goes on; nothing
needs repair. With a
deterministic mutator, one worker and a fixed seed, two runs produce the same programs.
Training is a :class:`~qdevolve.evolve.training.listener.TrainingListener` the engine calls.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from qdevolve.archive.islands_pool import PoolMigration, parse_pool_migration
from qdevolve.archive.snapshot import SnapshotSchedule
from qdevolve.backends.base import Backend
from qdevolve.backends.metered import MeteredBackend, meter_clients
from qdevolve.db.records import EvaluationRecord
from qdevolve.db.store import BudgetSpent, LineageStore
from qdevolve.errors import ConfigError, EvaluationSetupError, QdevolveError, RunAborted
from qdevolve.evolve.core import loop
from qdevolve.evolve.core.archive_rebuild import rebuild
from qdevolve.evolve.core.breeder import Breeder, Child, ChildPlan, ProgramCache
from qdevolve.evolve.core.duplicates import tell_copies
from qdevolve.evolve.core.hooks import (
    ChildObserver,
    DeadlineAware,
    StatefulBackend,
    fixed_code_checked,
)
from qdevolve.evolve.core.plugins import EnginePlugins, RewardReporting, build_backend, make_limits
from qdevolve.evolve.core.prompt_population import PromptEvolution
from qdevolve.evolve.core.record import TellRecord
from qdevolve.evolve.core.run_state import counters_state, restore_counters
from qdevolve.evolve.executors import WorkerLost
from qdevolve.evolve.executors.local import make_sandbox
from qdevolve.evolve.report import RunLedger, RunSummary, summarize
from qdevolve.evolve.setup import BudgetMeter, Example, RunConfig
from qdevolve.evolve.training import RewardCounting, TrainingListener, score_reward
from qdevolve.mutation.base import Candidate
from qdevolve.textsafe import terminal_safe_line
from qdevolve.types import ArchiveEvent, EvalResult, Program, new_id

__all__ = ["Evolution", "RunSummary", "make_limits", "make_sandbox", "default_db_path"]


class Evolution:
    """A run of the outer loop over one lineage database.

    Use :meth:`start` for a new run (evaluates the seed first) and :meth:`resume` to go on
    with a stored one; then :meth:`run`. ``listener`` trains a policy while evolving (built
    from ``config.train`` when not given, unless ``train`` is False: :meth:`start` builds it
    once the run is stored, since the policy's base version is stored under the run).
    """

    def __init__(self, store: LineageStore, run_id: str, example: Example, config: RunConfig, *,
                 progress: bool = True, console: Any = None, plugins: EnginePlugins | None = None,
                 listener: TrainingListener | None = None, backend: Backend | None = None,
                 train: bool = True) -> None:
        self.store, self.run_id, self.example, self.config = store, run_id, example, config
        self.progress, self.console = progress, console
        if plugins is None:
            plugins = EnginePlugins.build(config)
            from qdevolve.evolve.setup import current_plugin_files

            plugins.plugin_files = tuple(Path(pf["path"]) for pf in current_plugin_files(store.plugin_files(run_id)))
        self.plugins = plugins
        self.archive, self.executor = self.plugins.archive, self.plugins.executor
        self.rng = np.random.default_rng(config.seed)
        self.cache = ProgramCache(store)  # parents and inspirations, by id
        self.breeder = Breeder(run_id=run_id, rng=self.rng, archive=self.archive, selection=self.plugins.selection,
                               operators=self.plugins.operators, weights=self.plugins.weights,
                               names=self.plugins.names, cache=self.cache, config=config,
                               prompt_settings={"example_dir": str(example.directory), **config.prompt})
        # tokens / cost of every spender (the engine, agents, judges), before anything can spend
        self.budget = BudgetMeter.from_config(config.budget, store.get_state(run_id, "usage"))
        if listener is None and train:
            listener = _default_listener(store, run_id, config)
        self._use_listener(listener, backend)
        self.ledger = RunLedger(budget=config.iterations)  # every counter; the display reads only this
        self.hashes: set[str] = set()         # code hashes stored or in flight (dedupe)
        self.hooks: list[Callable[[Program, EvalResult, Candidate | None], Any]] = []
        self.unevaluated: list[Program] = []  # left by runs of schema v1 (evaluated first on resume)
        self._stored_unevaluated: set[str] = set()  # their ids: tell writes no second program row
        self.novelty = self.plugins.novelty
        for kind, plugin in (("archive", self.archive), ("selection", self.plugins.selection),
                             ("embedding", self.novelty)):  # a model client of their own is metered too
            if plugin is not None:
                meter_clients(plugin, self.budget.spend, kind)
        self._tick: Callable[[], None] = lambda: None  # the display's refresh while running
        self._next_iteration, self._iteration_offset = 0, 0  # plan counter (stored; islands and prompts read it)
        self.snapshots = SnapshotSchedule()  # the archive's state, stored every so many tells
        self.prompts = PromptEvolution.from_config(config.prompt, self.plugins.operators, self.breeder.settings,
                                                   has_backend=bool(config.backend))
        self.breeder.prompts = self.prompts
        self._rebuild()
        # The budget counter each stored child claims in its tell's transaction (qdevolve.db.claims):
        # the run's own, or a pool shared by the runs of several controllers on one database.
        # Created by the start's transaction and again (unless it exists) when run() opens the run.
        self.budget_counter = f"pool:{config.budget_pool}" if config.budget_pool else run_id
        self._pool_spent = False
        self.migration = self._attach_migration()  # pool runs exchange elites through the database

    def _use_listener(self, listener: TrainingListener | None, backend: Backend | None) -> None:
        """The run's training listener and the backend it generates through (the listener's
        unless ``backend`` is given; ``config.backend`` without a listener). A run with
        ``train:`` whose listener is not built yet has no backend until it is."""
        self.listener = listener
        if backend is None and listener is not None:
            backend = listener.backend
        if backend is None and (listener is not None or not self.config.train):
            backend = build_backend(self.config)
        self.backend: Backend | None = backend
        self._reporter = backend if isinstance(backend, RewardReporting) else None
        # Every model client spends through a view of one metered wrapper, each on its own account:
        # the engine's mutations ("engine"; a self-modifying agent's "agent:<id>"), agents, judges.
        self.meter = None if backend is None else MeteredBackend(backend, self.budget.spend, "engine")
        use_backend = getattr(self.executor, "use_backend", None)  # an executor whose jobs generate (agents)
        if use_backend is not None:
            use_backend(None if self.meter is None else self.meter.for_spender("agent"))
        # A model client a plugin built itself (a judge with its own api_base, an operator's own
        # backend) is metered anyway: every attribute with generate() is wrapped, on its own account.
        clusterer = getattr(listener, "clusterer", None)
        if clusterer is not None:
            meter_clients(clusterer, self.budget.spend, "judge")
        for op, name in zip(self.plugins.operators, self.plugins.names, strict=False):
            meter_clients(op, self.budget.spend, f"operator:{name}")
        group = (listener.group_size if listener is not None else None) or self.config.children_per_parent
        if group < 1:
            raise ConfigError(f"group_size must be >= 1, got {group}")
        self.breeder.group_size = group

    def _attach_migration(self) -> PoolMigration | None:
        """The pool migration of this run, registered as a hook (``None``: not configured)."""
        parsed = parse_pool_migration(self.config.pool_migration, pool=self.config.budget_pool)
        if parsed is None:
            return None
        mig = PoolMigration(self.store, self.run_id, f"pool:{self.config.budget_pool}", *parsed,
                            archive=self.archive, program=self.cache.get, hashes=self.hashes,
                            remember=lambda p, r: self.cache.remember(p, r, self._elite_ids),
                            reload=self.reload_archive, evaluate=self._evaluate_migrant_now,
                            evaluate_async=self._evaluate_migrant)
        self.hooks.append(mig.after_child)
        return mig

    async def _evaluate_migrant(self, program: Program) -> EvalResult:
        """A pool migrant evaluated by this run's own evaluator and sandbox before it counts
        (its score came from the publisher's evaluator, which may be anyone's)."""
        outcome = await asyncio.wrap_future(self.executor.submit(self.plugins.job(program, self.example)))
        return outcome.result

    def _evaluate_migrant_now(self, program: Program) -> EvalResult:
        """:meth:`_evaluate_migrant`, blocking (``PoolMigration.pick_up`` called directly)."""
        return self.executor.submit(self.plugins.job(program, self.example)).result().result

    # -- construction ----------------------------------------------------------------------
    @classmethod
    def start(cls, example: Example, config: RunConfig, store: LineageStore, *, progress: bool = True,
              console: Any = None, plugin_files: list[Any] = (), listener: TrainingListener | None = None,
              **kw: Any) -> Evolution:
        """Create a run: build the plugins, evaluate and place every seed, then store the run in
        one unit of work.

        A seed that does not evaluate ``ok`` or that the archive cannot place is a setup error
        raised before anything is stored. The run row, its ``--plugin`` files, its budget
        counter and every seed's record (program, evaluation, archive events, run state) are
        committed in one transaction (:meth:`LineageStore.start_run`), so a process killed at
        any moment of the start leaves no run or a whole one that resumes."""
        plugins = EnginePlugins.build(config)  # a bad name fails before any evaluation is spent
        plugins.plugin_files = tuple(Path(pf.path) for pf in plugin_files)
        try:
            seeds, outcomes, events = [], [], []
            for path, code in example.seeds:
                seed = Program(code=code, run_id="seed-check", operator="seed", language=example.language)
                try:
                    outcome = plugins.executor.submit(plugins.job(seed, example)).result()
                except WorkerLost as exc:
                    raise RunAborted(f"{path}: the seed could not be evaluated: {exc}") from None
                plugins.check_seed(dataclasses.replace(example, seed_path=path), outcome.result)
                try:
                    events.append(plugins.archive.add(seed, outcome.result))
                except QdevolveError as exc:
                    raise EvaluationSetupError(f"{path}: the archive cannot place the seed: {exc}") from None
                seeds.append(seed)
                outcomes.append(outcome)
            run_cfg = config.to_dict()
            run_cfg["sandbox_resolved"] = plugins.sandbox_type
            run_id = new_id()  # nothing is stored under it until start_run commits
            evo = cls(store, run_id, example, config, progress=progress, console=console, plugins=plugins,
                      listener=listener, train=False, **kw)
            records = []
            for seed, outcome, seed_events in zip(seeds, outcomes, events, strict=True):
                seed.run_id = run_id
                records.append(evo._record(seed, outcome.result, None, outcome.worker, seed_events,
                                           stored_before=False, claim=None))
            store.start_run(run_id, name=config.name or example.directory.name, config=run_cfg,
                            example_dir=str(example.directory), seed=config.seed,
                            plugin_files=[(pf.path, pf.sha256, pf.names) for pf in plugin_files],
                            budget=(evo.budget_counter, 0),
                            batches=[*(r.rows() for r in records),
                                     {"run_id": run_id, "state": {"budget": config.iterations}}])
            if evo.listener is None and config.train:  # its base policy version is stored under the run
                evo._use_listener(_default_listener(store, run_id, config), kw.get("backend"))
        except BaseException:
            plugins.close()
            raise
        for record in records:
            evo._apply(record, None)
        return evo

    @classmethod
    def resume(cls, store: LineageStore, run_id: str, *, iterations: int | None = None, progress: bool = True,
               console: Any = None, example_dir: str | None = None,
               executor_options: dict[str, Any] | None = None, trust: Any = None, **kw: Any) -> Evolution:
        """Continue a stored run from the database alone (``iterations``: the new total budget;
        ``executor_options``: replace these of the stored executor options, e.g. a Ray
        cluster's new address)."""
        from qdevolve.evolve.setup import load_example

        run = store.get_run(run_id)
        config = RunConfig.from_dict(run["config"])
        budget = iterations if iterations is not None else store.get_state(run["id"], "budget")
        if budget is not None:
            config = config.with_overrides(iterations=int(budget))
        if executor_options:
            config = config.with_overrides(executor_options={**config.executor_options, **executor_options})
        loaded = load_example(example_dir or run["example_dir"], trust=trust)  # trust: qdevolve.evolve.setup.trust
        example = dataclasses.replace(loaded, config=config)
        return cls(store, run["id"], example, config, progress=progress, console=console, **kw)

    def _rebuild(self) -> None:
        """A stored run's archive (the one rebuild path: newest snapshot plus the evaluations
        after it), the selection rule's child statistics, caches and the ledger."""
        if self.store.count_evaluations(self.run_id):  # a new run's archive holds its seeds already
            self._set_archive(rebuild(self.store, self.run_id, points=1, spec=self.config.archive)[1].archive)
        observer = self.plugins.selection if isinstance(self.plugins.selection, ChildObserver) else None
        for _seq, prog, res in self.store.iter_evaluated(self.run_id):
            if observer is not None and prog.operator != "seed":
                observer.observe_child(prog.parent_ids, res.score if res.ok else None)
            if res.ok and res.score is not None:
                self.cache.remember(prog, res, self._elite_ids)
        self.ledger = RunLedger.from_store(self.store, self.run_id, self.config.iterations)
        self.unevaluated = self.store.unevaluated(self.run_id)
        self._stored_unevaluated = {p.id for p in self.unevaluated}
        self.hashes.update(self.store.code_hashes(self.run_id))
        if self.novelty is not None:
            try:
                self.novelty.add_many((p.code, p.island) for _, p, _ in self.store.iter_programs(self.run_id)
                                      if p.code)
            except ImportError as exc:
                raise ConfigError(f"novelty: {exc}") from None
        state = self.store.get_state(self.run_id, "rng")
        if state is not None:
            self.rng.bit_generator.state = state
        ensemble = self.store.get_state(self.run_id, "ensemble")  # bandit statistics of the LLM ensemble
        if ensemble is not None and isinstance(self.backend, StatefulBackend):
            self.backend.restore(ensemble)
        restore_counters(self, self.store.get_state(self.run_id, "counters"))
        if self.prompts is not None:
            self.prompts.rebuild(self.store, self.run_id)

    def reload_archive(self) -> None:
        """Put the archive back as the store holds it (after a ``tell`` whose commit failed):
        the run's newest snapshot plus the evaluations after it, then the received migrants."""
        self._set_archive(rebuild(self.store, self.run_id, points=1, spec=self.config.archive)[1].archive)
        if self.migration is not None:
            self.migration.replace_archive(self.archive)

    def _set_archive(self, archive: Any) -> None:
        self.archive = self.plugins.archive = self.breeder.archive = archive

    def _elite_ids(self) -> set[str]:
        return {e.program_id for e in self.archive.elites()}

    # -- ask --------------------------------------------------------------------------------
    def ask(self, iteration: int) -> ChildPlan:
        """The next child plan; reserves its children from the budget."""
        iteration += self._iteration_offset  # plans counted across resumes, duplicates included
        self._next_iteration = iteration + 1
        plan = self.breeder.plan(iteration, self.ledger.remaining)
        self.ledger.reserved += plan.n
        return plan

    async def breed(self, plan: ChildPlan) -> list[Child]:
        """Run the plan's operator; return the children to evaluate (duplicates dropped)."""
        op = plan.operator
        backend = self.backend if self.meter is None else self.meter.for_spender(
            f"agent:{plan.parent.id[:12]}" if getattr(op, "name", None) == "self" else "engine")
        try:
            if self.prompts is not None and self.prompts.due():  # the template population's turn
                # a meta-prompt's tokens are metered like every other call ("prompts" account)
                await self.prompts.evolve(self.rng, self.backend if self.meter is None
                                          else self.meter.for_spender("prompts"))
            cands = await op.propose(plan.parent, plan.context, backend)
        except (RunAborted, WorkerLost):
            self.ledger.reserved -= plan.n
            raise
        except Exception as exc:  # an operator bug: one failed mutation, not a dead run
            cands = [Candidate(code=None, operator=plan.operator_name, parent_ids=(plan.parent.id,),
                               error=f"operator '{plan.operator_name}' raised {type(exc).__name__}: {exc}")]
        finally:
            if self.prompts is not None:
                self.prompts.release(plan.template_id)
        cands = [fixed_code_checked(plan.parent, c, op) for c in cands]
        kept = []
        for c in self.breeder.children(plan, cands):
            if self._admit(c):
                kept.append(c)
            elif c.rollout is not None:
                plan.duplicates.append(c)
        self.ledger.reserved -= plan.n - len(kept)
        return kept

    def tell_duplicates(self, plan: ChildPlan) -> None:
        """Store the rollouts of the plan's copies (:func:`qdevolve.evolve.core.duplicates.tell_copies`)."""
        tell_copies(self, plan)

    def _admit(self, child: Child) -> bool:
        """False for a duplicate (or non-novel) child: not stored, not counted."""
        prog = child.program
        if child.failed is not None:
            self.ledger.dup_streak = 0
            return True
        if prog.code_hash in self.hashes:
            self.ledger.duplicate(self.config.max_duplicate_streak)
            return False
        if self.novelty is not None:
            novel, _sim, vec = self.novelty.check(prog.code, prog.island)
            if not novel:
                self.ledger.duplicate(self.config.max_duplicate_streak, "duplicate or non-novel")
                return False
            self.novelty.admit(prog.island, vec)
        self.ledger.dup_streak = 0
        self.hashes.add(prog.code_hash)
        return True

    async def evaluate(self, child: Child) -> None:
        """Place the child's evaluation on the executor, then :meth:`tell` its result."""
        if child.failed is not None:
            result, worker = child.failed, None
        else:
            outcome = await asyncio.wrap_future(self.executor.submit(self.plugins.job(child.program, self.example)))
            result, worker = outcome.result, outcome.worker
        self.tell(child.program, result, child=child, worker=worker)
        for hook in self.hooks:
            out = hook(child.program, result, child.candidate)
            if inspect.isawaitable(out):
                await out

    async def after_job(self, children: list[Child]) -> None:
        if self.listener is not None:
            await self.listener.after_job([c.program for c in children])
            reason = getattr(self.listener, "stop_reason", None)  # e.g. its sample budget is spent
            if reason:
                self.ledger.stop(str(reason))

    # -- tell -------------------------------------------------------------------------------
    def tell(self, program: Program, result: EvalResult, *, child: Child | None = None,
             worker: str | None = None, events: list[ArchiveEvent] | None = None) -> list[ArchiveEvent]:
        """Record one evaluation as a unit of work (``events``: already placed, e.g. a seed).

        1. :meth:`_record` builds the :class:`TellRecord`: the program (unless stored
           earlier), its evaluation, archive events, the rollout with its reward, inspiration
           edges, the budget claim and the run state (rng, ensemble bandit, usage, counters);
        2. the store commits :meth:`TellRecord.rows` in one transaction;
        3. only then :meth:`_apply` updates memory: ledger, caches, selection observer,
           listener counters, the display.

        The archive and the ensemble's statistics are what the record is computed from: when
        the commit raises (``BudgetSpent`` included) both are put back as they were before
        this tell, so memory holds what the store holds.
        """
        stored_before = program.id in self._stored_unevaluated
        claim = None if stored_before or program.operator == "seed" else (self.budget_counter, 1, self.config.iterations)
        if claim is not None and self.config.budget_pool and self._pool_left() <= 0:
            return self._pool_done()
        undo = _Undo(self, placed=events is not None)
        try:
            record = self._record(program, result, child, worker, events, stored_before, claim)
            self.store.write(**record.rows())
        except BudgetSpent:  # another controller took the pool's last units since _pool_left
            undo()
            if not self.config.budget_pool:
                raise
            return self._pool_done()
        except BaseException:
            undo()
            raise
        self._apply(record, child)
        return record.events

    def _record(self, program: Program, result: EvalResult, child: Child | None, worker: str | None,
                events: list[ArchiveEvent] | None, stored_before: bool,
                claim: tuple[str, int, int] | None) -> TellRecord:
        """Everything ``tell`` stores, in one record (the archive places the program here)."""
        if events is None:
            events = self._archive_add(program, result)
        rollout = child.rollout if child is not None else None
        reward = None
        if rollout is not None:
            parent = self.cache.get(program.parent_ids[0])[1] if program.parent_ids else None
            reward = (self.listener.reward if self.listener is not None else score_reward)(program, result, events,
                                                                                           parent)
            rollout.reward, rollout.reward_vector, rollout.cluster_key = reward.reward, reward.vector, \
                reward.cluster_key
        if self._reporter is not None and child is not None and child.candidate.completion is not None:
            parent_score = self.cache.get(program.parent_ids[0])[1].score if program.parent_ids else None
            model = child.candidate.completion.model
            if result.ok and result.score is not None and parent_score is not None and model:
                self._reporter.report(model, result.score - parent_score)  # credited in the stored state
        return TellRecord(
            run_id=self.run_id, program=program, result=result, stored_before=stored_before,
            edges=tuple(child.edges) if child is not None else (),
            evaluation=EvaluationRecord(program.id, result, self.plugins.sandbox_type, worker, self.run_id),
            events=events, rollout=rollout, reward=reward, state=self.run_state(), claim=claim,
            snapshot=None if program.operator == "seed" else self.snapshots.due(self.archive),
            templates=self.prompts.pending() if self.prompts is not None else [])

    def _apply(self, record: TellRecord, child: Child | None) -> None:
        """Memory after the commit: ledger, caches, observers, listener counters, display."""
        program, result = record.program, record.result
        self._stored_unevaluated.discard(program.id)
        if program.code:  # a seed's too: a later copy of it is a duplicate, as it is after a resume
            self.hashes.add(program.code_hash)
        self.ledger.note(program, result, new_program=not record.stored_before)
        if record.reward is not None and isinstance(self.listener, RewardCounting):
            self.listener.count_reward(program, record.reward)
        if program.operator != "seed":
            common = self.ledger.early_failure(result, self.config.fail_fast_children)
            if common is not None:
                raise RunAborted(f"the first {self.config.fail_fast_children} children all failed the same way "
                                 f"({result.status}: {terminal_safe_line(common)}); fix the cause, then "
                                 f"'qdevolve resume --db {self.store.name}'")
        if isinstance(self.plugins.selection, ChildObserver) and program.operator != "seed":
            self.plugins.selection.observe_child(program.parent_ids, result.score if result.ok else None)
        if self.prompts is not None:
            parent = self.cache.get(program.parent_ids[0])[1] if program.parent_ids else None
            self.prompts.committed(record.templates, program, result,
                                   None if parent is None else (parent.ok, parent.score))
        if result.ok and result.score is not None:
            self.cache.remember(program, result, self._elite_ids)
        self._tick()

    def _pool_left(self) -> int:
        return self.config.iterations - (self.store.budget_stored(self.budget_counter) or 0)

    def _pool_done(self) -> list[ArchiveEvent]:
        """The shared pool is spent: this child is not stored, this controller stops."""
        self._pool_spent = True
        self.ledger.reserved = max(0, self.ledger.reserved - 1)
        self.ledger.stop(f"budget: pool '{self.config.budget_pool}' spent ({self.config.iterations} "
                         f"children across its runs)")
        return []

    def run_state(self) -> dict[str, Any]:
        """The run-state keys every write of the run's progress carries (``qdevolve.evolve.core.run_state``):
        random state, token/cost usage, the ensemble's bandit statistics and the counters."""
        state: dict[str, Any] = {"rng": self.rng.bit_generator.state}
        state["usage"] = self.budget.state()
        if isinstance(self.backend, StatefulBackend):
            state["ensemble"] = self.backend.state()
        state["counters"] = counters_state(self)
        return state

    def _archive_add(self, program: Program, result: EvalResult) -> list[ArchiveEvent]:
        try:
            return self.archive.add(program, result)
        except QdevolveError as exc:
            if program.operator == "seed":
                raise
            # One program the archive cannot place (e.g. a missing feature) is invalid, not fatal.
            result.status, result.error, result.score = "invalid", f"archive: {exc}", None
            return self.archive.add(program, result)

    # -- the run ----------------------------------------------------------------------------
    def run(self) -> RunSummary:
        """Run until the budget (``config.iterations`` children), the wall time or a stop."""
        from qdevolve.evolve.report import ProgressDisplay

        lease = self.store.lease(self.run_id).acquire()  # one writer per run: refuses while another lives
        # one transaction: status, the budget asked for, the budget counter (created unless it
        # exists) and, for the run's own counter under its lease, the counter set to its children
        pool = bool(self.config.budget_pool)
        self.store.open_run(self.run_id, state={"budget": self.config.iterations},
                            budget=(self.budget_counter, 0 if pool else self.ledger.stored), reconcile=not pool)
        t0 = time.time()
        self.ledger.started_at, self.ledger.evaluated_at_start = t0, self.ledger.evaluated
        status = "stopped"
        try:
            wall = self.config.wall_time_s
            ends = [t0 + float(wall)] if wall else []
            if self.budget.max_wall_time:  # --max-wall-time, from the meter's (monotonic) start
                ends.append(t0 + self.budget.started + float(self.budget.max_wall_time) - time.monotonic())
            if ends and isinstance(self.backend, DeadlineAware):  # requests in flight end at the wall time
                self.backend.set_deadline(min(ends))
            with ProgressDisplay(self.ledger, enabled=self.progress, console=self.console,
                                 stats=self.archive.stats) as self._tick:
                asyncio.run(loop.drive(self, max_pending=self._max_pending(), wall_time_s=wall))
            status = "finished" if self.ledger.stored >= self.config.iterations or self._pool_spent else "stopped"
        except WorkerLost as exc:
            self.ledger.stop(f"worker lost: {exc}")
            raise RunAborted(f"{self.store.name}: run {self.run_id[:12]} stopped: {exc}; "
                             f"resume with 'qdevolve resume --db {self.store.name}'") from exc
        except RunAborted as exc:
            self.ledger.stop(str(exc))
            raise
        except Exception as exc:  # a plugin raised mid-run: the run is marked failed, resumable
            status = "failed"
            self.ledger.stop(f"{type(exc).__name__}: {exc}")
            raise RunAborted(f"{self.store.name}: run {self.run_id[:12]} failed: {type(exc).__name__}: "
                             f"{str(exc)[:300]}; fix the cause, then 'qdevolve resume --db {self.store.name}'") from exc
        finally:
            self._tick = lambda: None
            # what was spent after the last tell (a judge in after_job, an agent whose child was
            # not stored) is kept too: resume restores every spender's account
            self.store.set_state(self.run_id, "usage", self.budget.state())
            self.store.update_run(self.run_id, status=status)
            lease.release()
        return summarize(self, time.time() - t0)

    def _max_pending(self) -> int:
        workers = max(1, self.executor.slots)
        return (self.config.max_pending or (self.listener.max_pending if self.listener is not None else None)
                or (4 * workers if self.backend is not None else workers))

    def close(self) -> None:
        """Close the executor (and its sandboxes), the listener and the backend."""
        self.plugins.close()
        if self.listener is not None:
            self.listener.close()
        close = getattr(self.backend, "close", None)  # optional in the backend protocol
        if close is not None:
            res = close()
            if inspect.isawaitable(res):
                asyncio.run(res)


class _Undo:
    """Puts the archive and the ensemble's statistics back as they were before a tell whose
    commit failed. The archive is rebuilt from the store (snapshot plus tail: the store is
    the truth), the ensemble restored from its state taken now (a small dict); nothing is
    taken when there is nothing to put back."""

    def __init__(self, engine: Evolution, *, placed: bool) -> None:
        self.engine = engine
        self.placed = placed  # the events came with the call: the archive holds them already
        backend = engine.backend
        self.ensemble = backend.state() if engine._reporter is not None and isinstance(backend, StatefulBackend) \
            else None

    def __call__(self) -> None:
        engine = self.engine
        if self.ensemble is not None:
            engine.backend.restore(self.ensemble)  # type: ignore[union-attr]
        if not self.placed:
            engine.reload_archive()


def _default_listener(store: LineageStore, run_id: str, config: RunConfig) -> TrainingListener | None:
    if not config.train:
        return None
    from qdevolve.evolve.training import JoinedListener

    return JoinedListener(store, run_id, config)


def default_db_path(example_dir: Path, root: Path | None = None) -> Path:
    """``archives/<example>-<timestamp>.sqlite`` under the current directory."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return (root or Path("archives")) / f"{example_dir.name}-{stamp}.sqlite"

