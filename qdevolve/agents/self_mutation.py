"""``self``: the Darwin Gödel Machine's self-modification as a mutation operator.

The parent program *is* an agent; its child is what the parent agent returns when it is run
on its own source: ``run_agent(parent.code, task=AgentTask("self", ...), parent=parent.code,
feedback=<its per-task scores>, tools=...)``. The agent runs sandboxed in its own process with
the budget given here, enforced outside it; its ``tools.mutate`` applies the offline ``ast``
operator, ``tools.generate`` calls the run's backend when one is configured (else it raises
``ToolUnavailable`` in the agent), and ``tools.evaluate`` runs a candidate agent through the
example's first-stage evaluator (does it load and define ``propose``?) in the run's sandbox.
The agent's own process runs on the run's sandbox when it is ``local`` or ``bwrap``, else on
``bwrap`` where available, else ``local`` (:func:`~qdevolve.agents.scoring.agent_sandbox`);
the engine tells the operator the run's spec (:meth:`SelfMutation.use_sandbox`). The whole
example directory (every task's evaluator) is hidden from it.

The feedback the agent reads holds only the scoring tasks' figures: held-out metrics
(``heldout/<task>``) are removed, so self-modification never sees them.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from qdevolve import registry
from qdevolve.agents.benchmark import HELDOUT_PREFIX
from qdevolve.agents.interface import AgentBudget, AgentOutcome, AgentTask, run_agent
from qdevolve.agents.scoring import agent_sandbox
from qdevolve.errors import ConfigError
from qdevolve.mutation.base import Candidate, MutationContext
from qdevolve.types import EvalResult, Program

__all__ = ["SelfMutation", "self_feedback", "SELF_DESCRIPTION"]

SELF_DESCRIPTION = (
    "Improve this agent. It is a mutation operator: it is scored by calling propose(task, parent, feedback, "
    "tools) a few times on each benchmark task ({tasks}), each time on the task's best program so far, and "
    "the task's own evaluator scores what it returns; its score is the mean normalised improvement over the "
    "tasks (current: {score}). Return your whole improved source; it must still define propose(task, parent, "
    "feedback, tools) and use only tools to reach outside.")


def _plain_metrics(metrics: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in metrics.items()
            if isinstance(v, (int, float)) and HELDOUT_PREFIX not in k}


def self_feedback(result: EvalResult | None) -> dict[str, Any]:
    """Plain JSON feedback about the parent agent, held-out figures removed."""
    if result is None:
        return {"status": None, "score": None, "metrics": {}, "tasks": {}, "error": None, "feedback": ""}
    metrics = _plain_metrics(result.metrics)
    tasks = {k: v for k, v in metrics.items() if "/" not in k and k != "source_lines"}
    text = str(result.artifacts.get("tasks", "")) if isinstance(result.artifacts, dict) else ""
    return {"status": result.status, "score": result.score, "metrics": metrics, "tasks": tasks,
            "error": result.error, "feedback": text[:2000]}


@registry.mutation("self")
class SelfMutation:
    """The parent agent applied to its own source (sandboxed, budgeted).

    Args:
        calls: Model calls (``tools.mutate`` + ``tools.generate``) one self-modification may make.
        evaluations: ``tools.evaluate`` calls (first-stage checks of candidate agents).
        tokens: Tokens over ``tools.generate``.
        wall_s: Seconds before the agent's process tree is killed.
        memory_mb: Memory cap of the agent's processes.
    """

    n_parents = 1
    needs_backend = False

    def __init__(self, *, calls: int = 4, evaluations: int = 2, tokens: int = 32_000, wall_s: float = 60.0,
                 memory_mb: int = 512) -> None:
        if int(calls) < 0 or int(evaluations) < 0 or float(wall_s) <= 0:
            raise ConfigError("mutation 'self': calls and evaluations must be >= 0 and wall_s > 0")
        self.budget = AgentBudget(calls=int(calls), evaluations=int(evaluations), tokens=int(tokens),
                                  wall_s=float(wall_s), memory_mb=int(memory_mb))
        self._sandbox: Any = None
        self._lock = threading.Lock()
        self.sandbox_spec: dict[str, Any] = {"type": "auto"}

    def use_sandbox(self, spec: dict[str, Any] | str) -> None:
        """Follow the run's ``sandbox`` setting (the engine calls this with its resolved spec):
        ``tools.evaluate`` runs there and the agent's own process on
        :func:`~qdevolve.agents.scoring.agent_sandbox` of it. Until told: ``auto``."""
        spec = {"type": spec} if isinstance(spec, str) else dict(spec)
        if not isinstance(spec.get("type"), str):
            raise ConfigError(f"mutation 'self': a sandbox spec needs a 'type', got {spec!r}")
        with self._lock:
            box, self._sandbox = self._sandbox, None
            self.sandbox_spec = spec
        if box is not None and getattr(box, "close", None) is not None:
            box.close()

    def _box(self) -> Any:
        """The sandbox ``tools.evaluate`` uses (the run's, built once)."""
        with self._lock:
            if self._sandbox is None:
                from qdevolve.agents.executor import make_sandbox

                self._sandbox = make_sandbox(self.sandbox_spec)
            return self._sandbox

    def tools(self, context: MutationContext, lineage: list[dict[str, Any]], seed: int, backend: Any) -> Any:
        """The controller-side tools of one self-modification (the example directory hidden)."""
        from qdevolve.agents.scoring import benchmark_tools

        example = context.settings.get("example_dir")
        if not example:
            raise ConfigError("mutation 'self': the run's example directory is unknown (context.settings.example_dir)")
        return benchmark_tools(Path(example) / "evaluator.py", self._box(), lineage, seed, hide=Path(example),
                               backend=backend)

    async def propose(self, parent: Program, context: MutationContext, backend: Any = None) -> list[Candidate]:
        seeds = [int(context.rng.integers(0, 2**62)) for _ in range(max(1, context.n))]
        lineage = [_entry(parent, context.parent_result)] + [_entry(p, r) for p, r in context.inspirations]
        out = []
        for seed in seeds:
            out.append(await asyncio.to_thread(self._one, parent, context, backend, lineage, seed))
        return out

    def _one(self, parent: Program, context: MutationContext, backend: Any, lineage: list[dict[str, Any]],
             seed: int) -> Candidate:
        feedback = self_feedback(context.parent_result)
        description = SELF_DESCRIPTION.format(tasks=", ".join(sorted(feedback["tasks"])) or "unknown",
                                              score=feedback["score"])
        outcome: AgentOutcome = run_agent(
            parent.code, task=AgentTask(name="self", description=description, language=parent.language),
            parent=parent.code, feedback=feedback, tools=self.tools(context, list(lineage), seed, backend),
            budget=self.budget, sandbox=agent_sandbox(self.sandbox_spec))
        usage = {"status": outcome.status, "calls": outcome.calls, "evaluations": outcome.evaluations,
                 "tokens": outcome.tokens, "wall_s": round(outcome.wall_s, 3)}
        if outcome.status != "ok" or outcome.child is None:
            return Candidate(code=None, operator="self", parent_ids=(parent.id,),
                             error=f"self-modification of agent {parent.id[:12]}: {outcome.status}: {outcome.error}",
                             raw=outcome.log or None, metadata={"agent_call": usage})
        return Candidate(code=outcome.child, operator="self", parent_ids=(parent.id,), raw=outcome.log or None,
                         metadata={"agent_call": usage})

    def close(self) -> None:
        with self._lock:
            box, self._sandbox = self._sandbox, None
        if box is not None and getattr(box, "close", None) is not None:
            box.close()


def _entry(program: Program, result: EvalResult | None) -> dict[str, Any]:
    return {"id": program.id, "parent": program.parent_ids[0] if program.parent_ids else None,
            "score": None if result is None else result.score, "status": None if result is None else result.status}
