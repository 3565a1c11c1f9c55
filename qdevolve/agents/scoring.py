"""Score one agent: use it as the mutation operator on each benchmark task.

For every task the agent is called ``settings.iterations`` times; each call gets the task's
best program so far as its parent (the task's ``initial_program.py`` first) and returns one
child. The child is scored by the **task's evaluator in the sandbox**, never by anything the
agent says: the agent's own ``tools.evaluate`` results and its return value are only text and
advice. The agent's score is the mean normalised improvement over the scoring tasks; every
task's improvement is a metric, one per task (held-out ones under ``heldout/<name>``), the
scoring tasks' improvements in config order are the ``tests`` vector, and the best score the
evaluator gave on each scoring task is the ``best_scores`` artifact (JSON).
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qdevolve.agents.benchmark import BenchmarkTask, ScoringSettings, normalised_improvement
from qdevolve.agents.interface import AgentBudget, AgentOutcome, AgentTask, run_agent
from qdevolve.types import EvalResult, Program

__all__ = ["AgentScorer", "TaskRun", "seed_for", "benchmark_tools", "agent_sandbox"]

_FEEDBACK_TEXT = 2_000


def seed_for(*parts: str) -> int:
    """A stable 63-bit seed from text parts (an agent's code, a task name, a call index)."""
    return int.from_bytes(hashlib.sha256("\x00".join(parts).encode()).digest()[:8], "big") >> 1


@dataclass
class TaskRun:
    """What one agent did on one task."""

    task: BenchmarkTask
    seed_score: float
    best_score: float
    improvement: float
    statuses: dict[str, int] = field(default_factory=dict)  # agent outcome or child evaluation status -> count


def agent_sandbox(spec: Mapping[str, Any] | str) -> Mapping[str, Any] | str:
    """The sandbox an agent's own process runs in: the run's when it is ``local`` or ``bwrap``
    (the backends :func:`~qdevolve.agents.run_agent` supports); for any other (``docker``,
    ``auto``...) ``bwrap`` where bubblewrap is installed, else ``local``."""
    kind = spec if isinstance(spec, str) else spec.get("type")
    if kind in ("local", "bwrap"):
        return spec
    import shutil

    return "bwrap" if shutil.which("bwrap") else "local"


def _feedback(result: EvalResult) -> dict[str, Any]:
    """Plain JSON feedback about a program's evaluation (what the agent may read)."""
    text = "; ".join(f"{k}: {v}" for k, v in sorted(result.artifacts.items()) if isinstance(v, str))
    return {"status": result.status, "score": result.score,
            "metrics": {k: float(v) for k, v in result.metrics.items() if isinstance(v, (int, float))},
            "error": result.error, "feedback": text[:_FEEDBACK_TEXT]}


class AgentScorer:
    """Scores agents on a fixed task list with one sandbox (one executor slot's).

    Args:
        tasks: The benchmark tasks (held-out ones included).
        settings: Iterations and per-call budget.
        sandbox: A created sandbox instance (``evaluate(program, evaluator, limits)``).
        sandbox_spec: The resolved spec the agent's own process is launched with.
        limits: The sandbox limits of each task evaluation.
        tools_factory: Builds the controller-side tools of one agent call
            (keywords ``task, sandbox, lineage, seed, limits`` -> ``AgentTools``); the default
            is :func:`benchmark_tools`: ``TaskTools`` with the offline ``ast`` operator and
            ``backend``, the example directory hidden.
        seed_scores: Shared cache of the tasks' seed scores (name -> score).
        salt: Mixed into every call's seed: the same agent scored with another salt draws
            other mutations (a benchmark's repeated measurement); ``""`` in a run.
        backend: The run's generation backend (``tools.generate`` of the default tools;
            ``None``: offline, ``generate`` raises ``ToolUnavailable`` in the agent). Its calls
            and tokens count against ``settings.calls``/``settings.tokens`` like ``mutate``'s.
    """

    def __init__(self, tasks: list[BenchmarkTask], settings: ScoringSettings, sandbox: Any,
                 sandbox_spec: dict[str, Any], limits: Any = None,
                 tools_factory: Callable[..., Any] | None = None,
                 seed_scores: dict[str, float] | None = None, salt: str = "", backend: Any = None) -> None:
        self.tasks, self.settings, self.sandbox = tasks, settings, sandbox
        self.sandbox_spec, self.limits, self.backend = sandbox_spec, limits, backend
        self.tools_factory = tools_factory or functools.partial(_default_tools, backend=backend)
        self.seed_scores = seed_scores if seed_scores is not None else {}
        self.salt = salt
        self._lock = threading.Lock()

    @property
    def budget(self) -> AgentBudget:
        s = self.settings
        return AgentBudget(calls=s.calls, evaluations=s.evaluations, tokens=s.tokens, wall_s=s.wall_s,
                           memory_mb=s.memory_mb)

    def _evaluate(self, code: str, task: BenchmarkTask) -> EvalResult:
        program = Program(code=code, run_id="agents-scoring", operator="agent")
        try:
            return self.sandbox.evaluate(program, task.evaluator, self.limits)
        except Exception as exc:  # a sandbox bug is a failed child, not a failed agent
            return EvalResult(status="error", error=f"task '{task.name}': sandbox failure: {type(exc).__name__}: {exc}")

    def seed_result(self, task: BenchmarkTask) -> float:
        """The task's initial program's score (evaluated once, then cached)."""
        with self._lock:
            if task.name in self.seed_scores:
                return self.seed_scores[task.name]
        result = self._evaluate(task.seed_code, task)
        if not result.ok or result.score is None:
            raise RuntimeError(f"benchmark task '{task.name}': its initial_program.py does not evaluate "
                               f"({result.status}: {result.error}); check {task.evaluator}")
        with self._lock:
            self.seed_scores[task.name] = float(result.score)
        return float(result.score)

    def run_task(self, agent_code: str, task: BenchmarkTask) -> TaskRun:
        """Call the agent ``iterations`` times on ``task``; keep the best child the evaluator scored."""
        seed_score = self.seed_result(task)
        best_code, best = task.seed_code, EvalResult(status="ok", score=seed_score)
        lineage: list[dict[str, Any]] = [{"id": "seed", "parent": None, "score": seed_score, "status": "ok"}]
        statuses: dict[str, int] = {}
        for i in range(self.settings.iterations):
            tools = self.tools_factory(task=task, sandbox=self.sandbox, lineage=list(lineage),
                                       seed=seed_for(self.salt, agent_code, task.name, str(i)), limits=self.limits)
            outcome: AgentOutcome = run_agent(
                agent_code, task=AgentTask(name=task.name, description=task.description), parent=best_code,
                feedback=_feedback(best), tools=tools, budget=self.budget, sandbox=agent_sandbox(self.sandbox_spec))
            if outcome.status != "ok" or outcome.child is None:
                statuses[f"agent_{outcome.status}"] = statuses.get(f"agent_{outcome.status}", 0) + 1
                lineage.append({"id": f"call{i}", "parent": lineage[-1]["id"], "score": None,
                                "status": outcome.status})
                continue
            result = self._evaluate(outcome.child, task)  # the task's evaluator decides, in the sandbox
            statuses[result.status] = statuses.get(result.status, 0) + 1
            lineage.append({"id": f"call{i}", "parent": "best", "score": result.score, "status": result.status})
            if result.ok and result.score is not None and result.score > (best.score or 0.0):
                best_code, best = outcome.child, result
        score = float(best.score or 0.0)
        return TaskRun(task, seed_score, score, normalised_improvement(seed_score, score, task.target), statuses)

    def score(self, agent_code: str) -> EvalResult:
        """The agent's :class:`EvalResult`: mean normalised improvement over the scoring tasks."""
        t0 = time.monotonic()
        runs = [self.run_task(agent_code, task) for task in self.tasks]
        scoring = [r for r in runs if not r.task.heldout]
        metrics: dict[str, float] = {r.task.metric: r.improvement for r in runs}  # one metric per task
        best = json.dumps({r.task.name: r.best_score for r in scoring})  # the evaluators' best scores
        report = "; ".join(f"{r.task.metric}: {r.seed_score:.4g} -> {r.best_score:.4g} "
                           f"({', '.join(f'{k} {v}' for k, v in sorted(r.statuses.items())) or 'no calls'})"
                           for r in runs if not r.task.heldout)
        return EvalResult(status="ok", score=sum(r.improvement for r in scoring) / len(scoring), metrics=metrics,
                          tests=[r.improvement for r in scoring], artifacts={"tasks": report, "best_scores": best},
                          runtime_s=time.monotonic() - t0)


def _default_tools(*, task: BenchmarkTask, sandbox: Any, lineage: list[dict[str, Any]], seed: int,
                   limits: Any = None, backend: Any = None) -> Any:
    return benchmark_tools(task.evaluator, sandbox, lineage, seed, hide=task.directory.parent.parent,
                           backend=backend, limits=limits)


def benchmark_tools(evaluator: Path, sandbox: Any, lineage: list[dict[str, Any]], seed: int, *, hide: Path,
                    backend: Any = None, limits: Any = None) -> Any:
    """:class:`~qdevolve.agents.tools.TaskTools` with the offline ``ast`` operator and ``backend``
    whose agent process is kept from ``hide`` (the whole example directory: every task's
    evaluator, held-out ones included, not only the current task's)."""
    from qdevolve.agents.tools import TaskTools
    from qdevolve.mutation.ast_mutator import ASTMutation

    return TaskTools(evaluator, sandbox, ASTMutation(), backend, lineage, seed, limits=limits, hide=[hide])
