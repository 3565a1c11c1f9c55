"""``agents``: the executor that scores agents (the programs of an agents run).

Each job's program is an agent. A slot first evaluates it through the normal sandbox with the
example's ``evaluator.py`` (the cheap first stage: the agent loads and defines ``propose``); an
agent that fails it gets that failed evaluation. Then :class:`~qdevolve.agents.scoring.AgentScorer`
uses it as the mutation operator on every benchmark task under ``<example>/tasks/``, each
child scored by the task's own evaluator in the same sandbox, and the outcome is the
agent's :class:`~qdevolve.types.EvalResult` (score: mean normalised improvement on the scoring
tasks; metrics: every task's, held-out ones as ``heldout/<task>``).

Options (``run.executor_options`` in the example's ``config.yaml``)::

    tasks: {bowl: {}, line_fit: {heldout: true}}   # directories under <example>/tasks/
    iterations: 3      # agent calls per task
    calls: 4           # tools.mutate + tools.generate per agent call
    evaluations: 3     # tools.evaluate per agent call
    wall_s: 30         # seconds per agent call (its process tree is killed after)

The agent itself runs in its own sandboxed process (:func:`qdevolve.agents.run_agent`), on the
run's ``sandbox`` when it is ``local`` or ``bwrap`` (else ``bwrap`` where available, else
``local``); the controller only counts its tool requests and reads back text. With a model
backend configured (the engine calls :meth:`AgentExecutor.use_backend`), ``tools.generate``
reaches it within the same ``calls``/``tokens`` budget; offline it raises ``ToolUnavailable``.
"""

from __future__ import annotations

import dataclasses
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from qdevolve import registry
from qdevolve.agents.benchmark import BenchmarkTask, ScoringSettings, load_tasks
from qdevolve.agents.scoring import AgentScorer
from qdevolve.evolve.executors import EvalJob, EvalOutcome
from qdevolve.types import EvalResult

__all__ = ["AgentExecutor", "make_sandbox"]


def make_sandbox(spec: dict[str, Any]) -> Any:
    """A sandbox instance for a spec (``auto`` resolved to the best one here)."""
    from qdevolve.sandbox import resolve_sandbox

    return registry.sandbox.create(resolve_sandbox(spec))


@registry.executor("agents")
class AgentExecutor:
    """Scores agents on a benchmark of tasks, ``slots`` agents at once.

    Args:
        slots: Agents scored at once (the run's ``workers``).
        tasks: Task names (a list) or a mapping name -> ``{heldout, target, description}``.
        **settings: :class:`~qdevolve.agents.benchmark.ScoringSettings` fields.
    """

    name = "agents"

    def __init__(self, *, slots: int = 1, tasks: Any = None, **settings: Any) -> None:
        if int(slots) < 1:
            raise ValueError(f"slots must be >= 1, got {slots!r}")
        if not tasks:
            from qdevolve.errors import ConfigError

            raise ConfigError("run.executor_options.tasks: the agents executor needs the benchmark's task names "
                              "(directories under <example>/tasks/)")
        self.slots = int(slots)
        self.task_spec = tasks
        self.settings = ScoringSettings.from_options(settings)
        self._pool = ThreadPoolExecutor(max_workers=self.slots, thread_name_prefix="qdevolve-agents")
        self._boxes: dict[int, Any] = {}
        self._tasks: dict[Path, list[BenchmarkTask]] = {}
        self._seed_scores: dict[str, float] = {}
        self._lock = threading.Lock()
        self.backend: Any = None
        self._last_job: EvalJob | None = None

    def use_backend(self, backend: Any) -> None:
        """Give the agents the run's generation backend (``tools.generate`` while scoring);
        the engine calls this once it has one, metered (:mod:`qdevolve.backends.metered`): each
        agent's tokens are billed to ``agent:<program id>`` on the run's budget. ``None``: offline."""
        self.backend = backend

    def tasks_for(self, evaluator: Path) -> list[BenchmarkTask]:
        """The benchmark of the example whose first-stage evaluator is ``evaluator`` (loaded once)."""
        root = Path(evaluator).parent / "tasks"
        with self._lock:
            if root not in self._tasks:
                self._tasks[root] = load_tasks(root, self.task_spec)
            return self._tasks[root]

    def submit(self, job: EvalJob) -> Future[EvalOutcome]:
        return self._pool.submit(self._run, job)

    def _sandbox(self, spec: dict[str, Any]) -> Any:
        me = threading.get_ident()
        with self._lock:
            box = self._boxes.get(me)
        if box is None:
            box = make_sandbox(spec)
            with self._lock:
                self._boxes[me] = box
        return box

    def _run(self, job: EvalJob) -> EvalOutcome:
        worker = f"agents:{threading.current_thread().name}"
        with self._lock:
            self._last_job = job  # the held-out draws of the summary score on the same benchmark and sandbox
        try:
            box = self._sandbox(job.sandbox)
            first = box.evaluate(job.program, job.evaluator, job.limits, cascade_thresholds=job.cascade_thresholds)
            if not first.ok:
                first.error = f"agent {job.program.id[:12]}: first stage: {first.error}"
                return EvalOutcome(result=first, worker=worker)
            # the run hands a metered backend: this agent's tokens go on its own account of the run's budget
            backend = self.backend.for_spender(f"agent:{job.program.id[:12]}") \
                if callable(getattr(self.backend, "for_spender", None)) else self.backend
            scorer = AgentScorer(self.tasks_for(job.evaluator), self.settings, box, job.sandbox, job.limits,
                                 seed_scores=self._seed_scores, backend=backend)
            result = scorer.score(job.program.code)
            result.features = dict(first.features)
            result.runtime_s += first.runtime_s
        except Exception as exc:  # a sandbox or benchmark failure must not lose the program
            result = EvalResult(status="error", error=f"agent {job.program.id[:12]}: scoring failed: "
                                                      f"{type(exc).__name__}: {exc}")
        return EvalOutcome(result=result, worker=worker)

    def summary_rows(self, store: Any, run_id: str) -> list[tuple[str, str]]:
        """The end-of-run rows: the best agent minus the seed agent on the held-out tasks, over
        ``heldout_draws`` scorings of each (the stored one and fresh draws), with its interval."""
        from qdevolve.agents.summary import agent_rows

        draws = self.settings.heldout_draws
        with self._lock:
            job = self._last_job
        if job is None or draws < 2:
            return agent_rows(store, run_id)
        try:
            return agent_rows(store, run_id, draws=draws, rescore=lambda jobs: self.rescore_heldout(job, jobs))
        except Exception as exc:  # the run is stored: report the stored draw and why there are no others
            return [*agent_rows(store, run_id),
                    ("held-out draws", f"not scored ({type(exc).__name__}: {str(exc)[:300]}); the verdict above "
                                       "is the run's one stored draw")]

    def rescore_heldout(self, job: EvalJob, jobs: list[tuple[str, int]]) -> list[float]:
        """Each ``(agent code, draw)``'s mean normalised improvement on the held-out tasks,
        scored with the draw's own mutation draws (salt ``heldout-draw-<d>``; the run's own
        scoring is draw 0), ``slots`` at a time. A scoring that fails counts as 0."""
        tasks = [dataclasses.replace(t, heldout=False) for t in self.tasks_for(job.evaluator) if t.heldout]
        if not tasks or not jobs:
            return [0.0] * len(jobs)

        def one(code: str, draw: int) -> float:
            scorer = AgentScorer(tasks, self.settings, self._sandbox(job.sandbox), job.sandbox, job.limits,
                                 seed_scores=self._seed_scores, salt=f"heldout-draw-{draw}", backend=self.backend)
            result = scorer.score(code)
            return float(result.score) if result.ok and result.score is not None else 0.0

        from rich.console import Console

        console = Console(stderr=True)
        what = f"scoring the best and the seed agent on the held-out tasks: {len(jobs)} more draws"
        futures = [self._pool.submit(one, code, draw) for code, draw in jobs]
        if console.is_terminal:
            with console.status(what + " ..."):
                return [f.result() for f in futures]
        console.print(what, highlight=False)
        return [f.result() for f in futures]

    def close(self) -> None:
        """Wait for running scorings, then close every slot's sandbox."""
        self._pool.shutdown(wait=True)
        with self._lock:
            boxes, self._boxes = list(self._boxes.values()), {}
        for box in boxes:
            close = getattr(box, "close", None)
            if close is not None:
                close()
