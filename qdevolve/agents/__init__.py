"""Darwin Gödel agents: self-modifying mutation agents, scored on a benchmark of tasks.

An *agent* is untrusted Python defining ``propose(task, parent, feedback, tools) -> str``
(:mod:`qdevolve.agents.interface`); :func:`run_agent` runs it once, sandboxed, with budgets
held outside it. An agents run is an ordinary evolution run whose programs are agents:

* the ``self`` mutation (:class:`SelfMutation`) makes a child agent by running the parent agent
  on its own source;
* the ``agents`` executor (:class:`AgentExecutor`) scores an agent by using it as the mutation
  operator on the tasks under ``<example>/tasks/`` (:class:`AgentScorer`); held-out tasks are
  stored as ``heldout/<task>`` metrics and never feed selection;
* the run summary says whether the best agent beats the seed agent on the held-out tasks
  (:func:`heldout_comparison`).

Importing this package registers ``self`` and ``agents`` (they are also entry points).
See ``docs/agents.md``.
"""

from qdevolve.agents.benchmark import (
    BenchmarkTask,
    ScoringSettings,
    load_tasks,
    normalised_improvement,
)
from qdevolve.agents.executor import AgentExecutor
from qdevolve.agents.interface import AgentBudget, AgentOutcome, AgentTask, AgentTools, run_agent
from qdevolve.agents.scoring import AgentScorer, TaskRun
from qdevolve.agents.self_mutation import SelfMutation
from qdevolve.agents.summary import HeldoutComparison, agent_rows, heldout_comparison, heldout_curve

__all__ = [
    "AgentBudget",
    "AgentExecutor",
    "AgentOutcome",
    "AgentScorer",
    "AgentTask",
    "AgentTools",
    "BenchmarkTask",
    "HeldoutComparison",
    "ScoringSettings",
    "SelfMutation",
    "TaskRun",
    "agent_rows",
    "heldout_comparison",
    "heldout_curve",
    "load_tasks",
    "normalised_improvement",
    "run_agent",
]
