"""The evolution engine: select -> mutate -> evaluate (sandbox pool) -> store -> archive.

One asynchronous pipeline. Mutations (model calls) run as asyncio tasks, evaluations in a
pool of ``workers`` threads each driving a sandbox, so generation overlaps evaluation. Every
program is stored before it is evaluated, and its evaluation, archive events and the run's
random state are stored together in one transaction, so a run killed at any moment resumes
from the database alone: the archive is rebuilt by replaying ``add`` over the stored
evaluations in order, programs stored without an evaluation are evaluated first, and the
budget counts stored children so none is lost or duplicated. With a deterministic mutator,
one worker and a fixed seed, two runs produce the same programs in the same order.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import math
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from qdevolve import registry
from qdevolve.db.store import LineageStore
from qdevolve.errors import ConfigError, EvaluationSetupError, QdevolveError
from qdevolve.evolve.budget import BudgetMeter
from qdevolve.evolve.config import RunConfig
from qdevolve.evolve.example import Example
from qdevolve.mutation.base import Candidate, MutationContext
from qdevolve.types import EvalResult, Program, Rollout

__all__ = ["Evolution", "RunSummary", "make_limits", "make_sandbox"]

RAW_REPLY_LIMIT = 20_000


@dataclass
class RunSummary:
    """What a finished (or stopped) run reports."""

    run_id: str
    db: str
    evaluations: int
    budget: int
    seed_score: float | None
    best_score: float | None
    best_program_id: str | None
    by_status: dict[str, int]
    elapsed_s: float
    stats: dict[str, Any] = field(default_factory=dict)
    stop_reason: str = "budget"

    @property
    def gain(self) -> float | None:
        if self.best_score is None or self.seed_score is None:
            return None
        return self.best_score - self.seed_score


def make_limits(limits: dict[str, Any]) -> Any:
    """Build :class:`qdevolve.sandbox.SandboxLimits` from the config's ``limits`` mapping."""
    from qdevolve.sandbox import SandboxLimits

    try:
        kw = dict(limits)
        if isinstance(kw.get("env_allow"), list):
            kw["env_allow"] = tuple(kw["env_allow"])
        if "env" in kw:  # compat hook: limits.env adds to the default sandbox environment
            from qdevolve.evolve.validate import sandbox_env

            kw["env"] = sandbox_env(kw["env"])
        return SandboxLimits(**kw)
    except TypeError as exc:
        raise ConfigError(f"limits: {exc}") from None


def make_sandbox(spec: dict[str, Any]) -> tuple[str, Any]:
    """Create the configured sandbox (``auto`` picks the best one available here)."""
    from qdevolve.sandbox import best_available

    spec = dict(spec)
    if spec.get("type", "auto") == "auto":
        spec["type"] = best_available()
    return spec["type"], registry.sandbox.create(spec)


class Evolution:
    """A run of the outer loop over one lineage database.

    Use :meth:`start` for a new run (validates and evaluates the seed first) and
    :meth:`resume` to continue a stored one; then :meth:`run`.
    """

    def __init__(self, store: LineageStore, run_id: str, example: Example, config: RunConfig, *,
                 progress: bool = True, console: Any = None, sandbox: tuple[str, Any] | None = None) -> None:
        self.store, self.run_id, self.example, self.config = store, run_id, example, config
        self.progress, self.console = progress, console
        self.archive = registry.archive.create(config.archive)
        self.selection = registry.selection.create(config.selection)
        self.operators, self.weights = self._make_operators(config)
        self.backend = self._make_backend(config)
        self.limits = make_limits(config.limits)
        self.sandbox_name, self.sandbox = sandbox or make_sandbox(config.sandbox)
        self.cascade = config.evaluator.get("cascade_thresholds")
        self.rng = np.random.default_rng(config.seed)
        self.by_status: Counter[str] = Counter()
        self.hashes: set[str] = set()
        self.cache: dict[str, tuple[Program, EvalResult]] = {}
        self.children = 0           # children stored (the budget counter)
        self.evaluated = 0          # children evaluated
        self.seed_score: float | None = None
        self.n_seeds = 0            # seed programs stored (several seeds: every one starts the archive)
        self.best: tuple[float, str] | None = None
        self.dup_streak = 0
        self.stop_reason = "budget"
        self.hooks: list[Callable[[Program, EvalResult, Candidate | None], Any]] = []
        self._unevaluated: list[Program] = []
        self.budget = BudgetMeter.from_config(config.budget, store.get_state(run_id, "usage"))  # compat hook
        self.novelty = None
        if config.novelty is not None:
            from qdevolve.evolve.novelty_filter import EmbeddingNoveltyFilter

            try:
                self.novelty = EmbeddingNoveltyFilter(**config.novelty)
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"novelty: {exc}") from None
        self._rebuild()

    # -- construction ----------------------------------------------------------------------
    @staticmethod
    def _make_operators(config: RunConfig) -> tuple[list[Any], np.ndarray]:
        specs = config.mutation or ([{"type": "diff", "weight": 0.7}, {"type": "rewrite", "weight": 0.2},
                                     {"type": "crossover", "weight": 0.1}] if config.backend
                                    else [{"type": "ast", "weight": 1.0}])
        ops, weights = [], []
        for spec in specs:
            spec = dict(spec)
            w = float(spec.pop("weight", 1.0))
            if w <= 0:
                continue
            op = registry.mutation.create(spec)
            if getattr(op, "needs_backend", False) and not config.backend:
                raise ConfigError(
                    f"mutation '{spec['type']}' needs a model: pass --backend openai --model NAME "
                    f"[--api-base URL] (or a 'backend' section in config.yaml), or use --mutation ast")
            op.name = spec["type"]
            ops.append(op)
            weights.append(w)
        if not ops:
            raise ConfigError("mutation: no operator with a positive weight")
        return ops, np.asarray(weights) / sum(weights)

    @staticmethod
    def _make_backend(config: RunConfig) -> Any:
        return registry.backend.create(config.backend) if config.backend else None

    @classmethod
    def evaluate_seed(cls, example: Example, config: RunConfig, sandbox: tuple[str, Any],
                      seed_path: Path | None = None, seed_code: str | None = None) -> EvalResult:
        """Evaluate a seed before anything is stored; a failure is a setup error."""
        seed_path = seed_path or example.seed_path
        seed = Program(code=example.seed_code if seed_code is None else seed_code, run_id="seed-check",
                       language=example.language)
        result = sandbox[1].evaluate(seed, example.evaluator_path, make_limits(config.limits),
                                     cascade_thresholds=config.evaluator.get("cascade_thresholds"))
        if result.status != "ok" or result.score is None:
            detail = (result.error or "").strip().splitlines()
            detail_s = detail[-1] if detail else "no detail"
            raise EvaluationSetupError(
                f"{example.evaluator_path}: evaluating the seed {seed_path.name} gave status "
                f"'{result.status}' ({detail_s}); fix the evaluator or the seed before evolving")
        return result

    @classmethod
    def start(cls, example: Example, config: RunConfig, store: LineageStore, *, progress: bool = True,
              console: Any = None, plugin_files: list[Any] = ()) -> Evolution:
        """Create a run: check plugins, evaluate the seed, then store run + seed atomically."""
        # Build every plugin first so a bad name fails before any evaluation is spent.
        archive = registry.archive.create(config.archive)
        registry.selection.create(config.selection)
        cls._make_operators(config)
        make_limits(config.limits)
        sandbox = make_sandbox(config.sandbox)
        seed_results = [cls.evaluate_seed(example, config, sandbox, p, c) for p, c in example.seeds]
        run_cfg = config.to_dict()
        run_cfg["sandbox_resolved"] = sandbox[0]
        seeds = [Program(code=c, operator="seed", language=example.language) for _, c in example.seeds]
        rng = np.random.default_rng(config.seed)
        # Place the seeds before the run row exists: a seed the archive cannot place is a setup error.
        events = [e for seed, res in zip(seeds, seed_results, strict=True) for e in archive.add(seed, res)]
        run_id = store.create_run(name=config.name or example.directory.name, config=run_cfg,
                                  example_dir=str(example.directory), seed=config.seed)
        for seed in seeds:
            seed.run_id = run_id
        store.write(run_id=run_id, programs=seeds,
                    evaluations=[(seed.id, res, sandbox[0]) for seed, res in zip(seeds, seed_results, strict=True)],
                    events=events, state={"rng": rng.bit_generator.state, "budget": config.iterations})
        for pf in plugin_files:
            store.add_plugin_file(run_id, pf.path, pf.sha256, pf.names)
        return cls(store, run_id, example, config, progress=progress, console=console, sandbox=sandbox)

    @classmethod
    def resume(cls, store: LineageStore, run_id: str, *, iterations: int | None = None,
               progress: bool = True, console: Any = None, example_dir: str | None = None) -> Evolution:
        """Continue a stored run from the database alone (``iterations``: the new total budget)."""
        from qdevolve.evolve.example import load_example

        run = store.get_run(run_id)
        config = RunConfig.from_dict(run["config"])
        if iterations is not None:
            config = config.with_overrides(iterations=iterations)
            store.set_state(run["id"], "budget", iterations)
        else:
            budget = store.get_state(run["id"], "budget")
            if budget is not None:
                config = config.with_overrides(iterations=int(budget))
        example = load_example(example_dir or run["example_dir"])
        example = dataclasses.replace(example, config=config)
        store.update_run(run["id"], status="running")
        return cls(store, run["id"], example, config, progress=progress, console=console)

    # -- rebuild from the store -------------------------------------------------------------
    def _rebuild(self) -> None:
        """Replay ``archive.add`` over the stored evaluations in the order they were made."""
        for _seq, prog, res in self.store.iter_evaluated(self.run_id):
            if prog.operator == "seed":
                self.n_seeds += 1
                if self.seed_score is None or (res.score is not None and res.score > self.seed_score):
                    self.seed_score = res.score
            else:
                self.evaluated += 1
            self._note_result(prog, res, replay=True)
        self._unevaluated = self.store.unevaluated(self.run_id)
        self.children = self.store.count_programs(self.run_id) - self._n_seeds()
        for h in self.store.code_hashes(self.run_id):
            self.hashes.add(h)
        if self.novelty is not None:
            try:
                self.novelty.add_many((p.code, p.island) for _, p, _ in self.store.iter_programs(self.run_id)
                                      if p.code)
            except ImportError as exc:
                raise ConfigError(f"novelty: {exc}") from None
        state = self.store.get_state(self.run_id, "rng")
        if state is not None:
            self.rng.bit_generator.state = state

    def _note_result(self, prog: Program, res: EvalResult, *, replay: bool) -> list[Any]:
        try:
            events = self.archive.add(prog, res)
        except QdevolveError as exc:
            if replay or prog.operator == "seed":
                raise
            # One program the archive cannot place (e.g. a missing feature) is invalid, not fatal.
            res.status, res.error, res.score = "invalid", f"archive: {exc}", None
            events = self.archive.add(prog, res)
        self.by_status[res.status] += 1
        if res.status == "ok" and res.score is not None and math.isfinite(res.score):
            if self.best is None or res.score > self.best[0]:
                self.best = (res.score, prog.id)
            self.cache[prog.id] = (prog, res)
            if len(self.cache) > 20_000:
                keep = {e.program_id for e in self.archive.elites()}
                self.cache = {k: v for k, v in self.cache.items() if k in keep}
        return events

    # -- one mutation ----------------------------------------------------------------------
    def _lookup(self, program_id: str) -> tuple[Program, EvalResult]:
        hit = self.cache.get(program_id)
        if hit is None:
            prog = self.store.get_program(program_id)
            res = self.store.get_evaluation(program_id) or EvalResult(status="error", error="missing")
            hit = self.cache[program_id] = (prog, res)
        return hit

    def _pick(self, iteration: int) -> tuple[Any, MutationContext, Program]:
        op = self.operators[int(self.rng.choice(len(self.operators), p=self.weights))]
        n_islands = int(getattr(self.archive, "n_islands", 1) or 1)
        island = iteration % n_islands if n_islands > 1 else None
        n_par = int(getattr(op, "n_parents", 1) or 1)
        elites = self.archive.sample(self.rng, self.selection, island=island, n=n_par)
        if n_par > 1:
            elites = self._distinct_parents(elites, island)
            if len(elites) < n_par:  # too few programs to cross yet: use a one-parent operator
                singles = [i for i, o in enumerate(self.operators) if int(getattr(o, "n_parents", 1) or 1) == 1]
                if singles:
                    w = self.weights[singles] / self.weights[singles].sum()
                    op = self.operators[singles[int(self.rng.choice(len(singles), p=w))]]
                elites = elites[:1]
        parent, parent_res = self._lookup(elites[0].program_id)
        others = [self._lookup(e.program_id) for e in elites[1:]]
        insp_cfg = self.config.inspirations
        insp = []
        if getattr(op, "needs_backend", False) and (insp_cfg.get("n_best") or insp_cfg.get("n_diverse")):
            insp = [self._lookup(e.program_id) for e in self.archive.inspirations(
                parent.id, self.rng, n_best=int(insp_cfg.get("n_best", 2)),
                n_diverse=int(insp_cfg.get("n_diverse", 2)), island=island)]
        ctx = MutationContext(rng=self.rng, parent_result=parent_res, inspirations=insp,
                              other_parents=others, iteration=iteration,
                              island=island if island is not None else parent.island,
                              n=self.config.children_per_parent, settings=self._prompt_settings())
        return op, ctx, parent

    def _distinct_parents(self, elites: list[Any], island: int | None) -> list[Any]:
        """Parents with distinct programs: redraw duplicates, then any other elite at random."""
        out, seen = [], set()
        for e in elites:
            if e.program_id not in seen:
                out.append(e)
                seen.add(e.program_id)
        want = len(elites)
        for _ in range(4):
            if len(out) >= want:
                break
            for e in self.archive.sample(self.rng, self.selection, island=island, n=want - len(out)):
                if e.program_id not in seen:
                    out.append(e)
                    seen.add(e.program_id)
        if len(out) < want:
            others = [e for e in self.archive.elites() if e.program_id not in seen]
            while others and len(out) < want:
                e = others.pop(int(self.rng.integers(len(others))))
                out.append(e)
                seen.add(e.program_id)
        return out

    def _prompt_settings(self) -> dict[str, Any]:
        s = dict(self.config.prompt)
        s.setdefault("example_dir", str(self.example.directory))
        return s

    def _child(self, cand: Candidate, parent: Program, ctx: MutationContext, op: Any) -> Program:
        gens = [parent.generation] + [p.generation for p, _ in ctx.other_parents]
        meta = dict(cand.metadata)
        comp = cand.completion
        if comp is not None:
            meta["usage"] = {"prompt_tokens": comp.prompt_tokens, "completion_tokens": comp.completion_tokens,
                             "model": comp.model}
        if cand.code is None:
            meta.update(failed_mutation=True, reason=cand.error)
        parent_ids = tuple(dict.fromkeys(cand.parent_ids)) or (parent.id,)
        return Program(code=cand.code if cand.code is not None else "", run_id=self.run_id,
                       language=parent.language, parent_ids=parent_ids, generation=1 + max(gens),
                       island=ctx.island, operator=cand.operator or op.name, prompt_hash=cand.prompt_hash,
                       policy_version=getattr(comp, "policy_version", None) if comp is not None else None,
                       metadata=meta)

    def _rollout(self, cand: Candidate, child: Program) -> Rollout | None:
        comp = cand.completion
        if comp is None:
            return None
        return Rollout(prompt=cand.prompt or "", completion=comp.text, run_id=self.run_id,
                       token_ids=list(comp.token_ids), logprobs=list(comp.logprobs),
                       prompt_token_ids=list(comp.prompt_token_ids), policy_version=comp.policy_version,
                       program_id=child.id, group_id=cand.group_id, finish_reason=comp.finish_reason,
                       prompt_tokens=comp.prompt_tokens, completion_tokens=comp.completion_tokens,
                       metadata={"operator": child.operator, "parent_ids": list(child.parent_ids),
                                 "model": comp.model})

    def _evaluate_sync(self, program: Program) -> EvalResult:
        try:
            return self.sandbox.evaluate(program, self.example.evaluator_path, self.limits,
                                         cascade_thresholds=self.cascade)
        except Exception as exc:  # a sandbox bug must not lose the program
            return EvalResult(status="error", error=f"sandbox failure: {type(exc).__name__}: {exc}")

    async def _finish(self, program: Program, result: EvalResult, cand: Candidate | None,
                      rollout: Rollout | None) -> None:
        events = self._note_result(program, result, replay=False)
        self.store.write(run_id=self.run_id, evaluations=[(program.id, result, self.sandbox_name)],
                         events=events, state={"rng": self.rng.bit_generator.state, "usage": self.budget.state()})
        if rollout is not None:
            self.store.set_rollout_rewards([(rollout.id, *self.rollout_reward(program, result, events))])
        if program.operator != "seed":
            self.evaluated += 1
        if cand is not None and self.backend is not None and hasattr(self.backend, "report"):
            parent_score = self._lookup(program.parent_ids[0])[1].score if program.parent_ids else None
            if result.ok and result.score is not None and parent_score is not None:
                model = getattr(cand.completion, "model", None)
                if model:
                    self.backend.report(model, result.score - parent_score)
        for hook in self.hooks:
            out = hook(program, result, cand)
            if inspect.isawaitable(out):
                await out
        self._tick()

    def rollout_reward(self, program: Program, result: EvalResult,
                       events: list[Any]) -> tuple[float | None, list[float] | None, str | None]:
        """``(reward, reward_vector, cluster_key)`` of the rollout that produced ``program``.

        The plain engine records the score (``None`` unless ``ok``), the per-test vector and the
        archive cell; :class:`~qdevolve.evolve.joined.JoinedEvolution` overrides it with the
        training reward.
        """
        cell = next((e.cell for e in events if e.cell), None)
        return (result.score if result.ok else None), result.tests, cell

    async def after_job(self, candidates: list[Candidate]) -> None:
        """Called once all children of one parent prompt are stored and evaluated."""

    async def _evaluate_and_store(self, loop: asyncio.AbstractEventLoop, program: Program,
                                  cand: Candidate | None = None, rollout: Rollout | None = None) -> None:
        result = await loop.run_in_executor(self._pool, self._evaluate_sync, program)
        await self._finish(program, result, cand, rollout)

    async def _job(self, loop: asyncio.AbstractEventLoop, iteration: int, reserved: int) -> None:
        """One parent -> up to ``reserved`` children (unused reservations are returned)."""
        used = 0
        try:
            op, ctx, parent = self._pick(iteration)
            ctx.n = max(1, min(ctx.n, reserved))
            try:
                cands = await op.propose(parent, ctx, self.backend)
            except Exception as exc:  # an operator bug: one failed mutation, not a dead run
                cands = [Candidate(code=None, operator=op.name, parent_ids=(parent.id,),
                                   error=f"operator '{op.name}' raised {type(exc).__name__}: {exc}")]
            self.budget.observe_candidates(cands)
            evals = []
            for cand in cands[:reserved]:
                child = self._child(cand, parent, ctx, op)
                rollout = self._rollout(cand, child)
                if cand.code is None:
                    used += 1
                    self.dup_streak = 0
                    res = EvalResult(status="invalid", error=(cand.error or "mutation failed")[:500],
                                     artifacts={"raw_reply": (cand.raw or "")[:RAW_REPLY_LIMIT],
                                                "reason": cand.error or ""})
                    self.store.write(programs=[child], rollouts=[rollout] if rollout else [])
                    self.children += 1
                    await self._finish(child, res, cand, rollout)
                    continue
                if child.code_hash in self.hashes:
                    self.dup_streak += 1
                    if self.dup_streak >= self.config.max_duplicate_streak:
                        self.stop_reason = f"{self.dup_streak} duplicate children in a row"
                        self._stop = True
                    continue
                if self.novelty is not None:
                    novel, _sim, vec = self.novelty.check(child.code, child.island)
                    if not novel:  # near-duplicate by embedding: skipped like a duplicate
                        self.dup_streak += 1
                        if self.dup_streak >= self.config.max_duplicate_streak:
                            self.stop_reason = f"{self.dup_streak} duplicate or non-novel children in a row"
                            self._stop = True
                        continue
                    self.novelty.admit(child.island, vec)
                self.dup_streak = 0
                self.hashes.add(child.code_hash)
                used += 1
                edges = [(e.id, child.id, "inspiration") for e, _ in ctx.inspirations]
                self.store.write(run_id=self.run_id, programs=[child], edges=edges,
                                 rollouts=[rollout] if rollout else [])
                self.children += 1
                evals.append(self._evaluate_and_store(loop, child, cand, rollout))
            self.children_reserved -= reserved - used
            if evals:
                await asyncio.gather(*evals)
            await self.after_job(cands)
        except Exception:
            self.children_reserved -= reserved - used
            raise

    # -- the loop --------------------------------------------------------------------------
    def run(self) -> RunSummary:
        """Run until the budget (``config.iterations`` children) or wall time is spent."""
        t0 = time.time()
        self._stop = False
        try:
            with self._display() as self._progress_cb:
                asyncio.run(self._run())
        finally:
            self.close_workers()
        status = "finished" if self.children >= self.config.iterations else "stopped"
        self.store.update_run(self.run_id, status=status)
        return self.summary(time.time() - t0)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        workers = max(1, int(self.config.workers))
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="qdevolve-sandbox")
        self._t0 = time.time()
        if self._unevaluated:
            pending, self._unevaluated = self._unevaluated, []
            await asyncio.gather(*(self._evaluate_and_store(loop, p) for p in pending))
        max_pending = self.config.max_pending or (4 * workers if self.backend is not None else workers)
        sem = asyncio.Semaphore(max_pending)
        tasks: set[asyncio.Task[None]] = set()
        self.children_reserved = self.children
        iteration = self.children
        deadline = self._t0 + self.config.wall_time_s if self.config.wall_time_s else None
        errors: list[BaseException] = []
        while not self._stop:
            await sem.acquire()
            if errors:
                sem.release()
                break
            if deadline and time.time() >= deadline:
                self.stop_reason = "wall time"
                sem.release()
                break
            budget_reason = self.budget.exceeded()
            if budget_reason:
                self.stop_reason = budget_reason
                sem.release()
                break
            remaining = self.config.iterations - self.children_reserved
            if remaining <= 0:
                if not tasks:
                    sem.release()
                    break
                sem.release()
                await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                continue
            reserved = min(remaining, max(1, self.config.children_per_parent))
            self.children_reserved += reserved
            task = asyncio.create_task(self._job(loop, iteration, reserved))
            iteration += 1
            tasks.add(task)

            def _done(t: asyncio.Task[None]) -> None:
                tasks.discard(t)
                sem.release()
                if not t.cancelled() and t.exception() is not None:
                    errors.append(t.exception())

            task.add_done_callback(_done)
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if errors:
            raise errors[0]

    @property
    def children_stored(self) -> int:
        return self.store.count_programs(self.run_id) - self._n_seeds()

    def _n_seeds(self) -> int:
        return max(1, self.n_seeds)

    def close_workers(self) -> None:
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.shutdown(wait=True)
        self.children = self.children_stored

    def close(self) -> None:
        for obj in (self.sandbox, self.backend):
            close = getattr(obj, "close", None)
            if close is not None:
                res = close()
                if inspect.isawaitable(res):
                    asyncio.run(res)

    # -- display ---------------------------------------------------------------------------
    def _display(self) -> Any:
        from qdevolve.evolve.display import ProgressDisplay

        return ProgressDisplay(self, enabled=self.progress, console=self.console)

    def _tick(self) -> None:
        cb = getattr(self, "_progress_cb", None)
        if cb is not None:
            cb()

    def summary(self, elapsed: float) -> RunSummary:
        stats = dict(self.archive.stats())
        if self.novelty is not None:
            stats["novelty_rejected"] = self.novelty.rejected
        if self.budget.usage:
            stats["usage"] = self.budget.state()
        return RunSummary(
            run_id=self.run_id, db=self.store.target, evaluations=self.store.count_evaluations(self.run_id),
            budget=self.config.iterations, seed_score=self.seed_score,
            best_score=self.best[0] if self.best else None,
            best_program_id=self.best[1] if self.best else None, by_status=dict(self.by_status),
            elapsed_s=elapsed, stats=stats, stop_reason=self.stop_reason)


def default_db_path(example_dir: Path, root: Path | None = None) -> Path:
    """``archives/<example>-<timestamp>.sqlite`` under the current directory."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return (root or Path("archives")) / f"{example_dir.name}-{stamp}.sqlite"
