"""The agent kind's contract: plain data in, plain data out, budgets held outside the agent.

An *agent* is untrusted, model-written Python defining::

    def propose(task: dict, parent: str, feedback: dict, tools) -> str: ...

It runs in a sandboxed process of its own (the sandbox's candidate principal) and reaches the
controller only through ``tools``, whose calls travel as length-prefixed JSON over a pipe pair.
The controller answers them with an :class:`AgentTools` implementation, counting every call
against an :class:`AgentBudget`; past the budget a tool raises ``BudgetExhausted`` inside the
agent.  The agent's return value is only *text* (the child's code): it is evaluated later by the
run's ordinary sandbox, never executed by the controller.  :func:`run_agent` turns every way the
agent's process can end into one :class:`AgentOutcome`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "AgentBudget",
    "AgentOutcome",
    "AgentTask",
    "AgentTools",
    "BudgetExhausted",
    "ToolUnavailable",
    "OUTCOME_STATUSES",
    "run_agent",
]

#: Every status an :class:`AgentOutcome` may carry.
OUTCOME_STATUSES = ("ok", "error", "timeout", "memory", "invalid", "killed")


class BudgetExhausted(Exception):
    """Raised (controller side) when a tool request goes past the agent's budget."""


class ToolUnavailable(Exception):
    """Raised by an :class:`AgentTools` handler that cannot serve a request (e.g. no model offline)."""


@dataclass(frozen=True)
class AgentTask:
    """Plain data handed to the agent (``dataclasses.asdict`` of it is the agent's ``task``).

    Attributes:
        name: The task's name, e.g. ``"circle_packing"``, or ``"self"`` for self-modification.
        description: What to improve, in words (the task's README paragraph or prompt).
        language: The language of the code the agent must return.
    """

    name: str
    description: str
    language: str = "python"


@dataclass(frozen=True)
class AgentBudget:
    """What one agent run may spend; enforced outside the agent.

    The controller-side tool server counts requests and refuses any that would exceed a count
    (the agent sees ``BudgetExhausted``); the launcher kills the agent's whole process tree at
    ``wall_s`` and caps its memory at ``memory_mb``.

    Attributes:
        calls: Model calls: each ``tools.generate`` and each ``tools.mutate`` counts 1.
        evaluations: ``tools.evaluate`` calls.
        tokens: Prompt + completion tokens over ``tools.generate`` (estimated as ``len // 4``
            when the backend does not report them).  A call is refused when the tokens already
            used reach the budget; the call that crosses it is still answered and counted.
        wall_s: Seconds after which the agent's process tree is killed (status ``timeout``);
            the clock runs from the start of the process and includes the time the controller
            spends serving the agent's tool calls (an evaluation counts against it).
        memory_mb: Address-space rlimit of each of the agent's processes and, where the
            machine has a memory cgroup, the cap of its whole process tree (status ``memory``).
        message_bytes: Largest request argument (prompt or code), and largest child, in UTF-8
            bytes; a frame on the pipe may add 1,024 bytes of JSON around it.

    Refused requests (past the budget, or a tool unavailable) cost nothing, but the run is
    ended (status ``killed``) after 64 of them: an agent cannot spin on a refused tool.
    """

    calls: int = 4
    evaluations: int = 0
    tokens: int = 32_000
    wall_s: float = 60.0
    memory_mb: int = 512
    message_bytes: int = 2_000_000


@dataclass
class AgentOutcome:
    """How one agent run ended.

    Attributes:
        status: ``"ok"`` | ``"error"`` (the agent raised or crashed) | ``"timeout"`` |
            ``"memory"`` | ``"invalid"`` (bad protocol message, non-string or oversized child) |
            ``"killed"`` (ended by a signal, or by the controller for flooding refused requests).
        child: The code ``propose`` returned; ``None`` unless ``status == "ok"``.
        calls: Model calls used (generate + mutate answered).
        evaluations: Evaluations used.
        tokens: Tokens used.
        wall_s: Seconds the run took.
        error: One line saying what went wrong (names the agent/task); ``None`` when ok.
        log: A bounded tail of the agent's stderr.
    """

    status: str
    child: str | None
    calls: int
    evaluations: int
    tokens: int
    wall_s: float
    error: str | None = None
    log: str = ""


@runtime_checkable
class AgentTools(Protocol):
    """The controller-side handlers the runtime calls on the agent's behalf.

    They run in the controller and must never execute the code they are handed: ``evaluate``
    goes through the run's sandbox.  Each returns plain JSON data.
    """

    def generate(self, prompt: str) -> tuple[str, int]:
        """Return (completion text, tokens used); raise :class:`ToolUnavailable` offline."""
        ...

    def mutate(self, code: str) -> str:
        """Return ``code`` changed once by the run's offline operator (``ast``)."""
        ...

    def evaluate(self, code: str) -> dict:
        """Return ``{"status", "score", "metrics", "feedback"}`` from the run's sandbox."""
        ...

    def lineage(self) -> list[dict]:
        """Return earlier attempts ``{"id", "parent", "score", "status"}`` (a copy)."""
        ...


def run_agent(
    agent_code: str,
    *,
    task: AgentTask,
    parent: str,
    feedback: dict,
    tools: AgentTools,
    budget: AgentBudget,
    sandbox: Mapping[str, Any] | str = "auto",
) -> AgentOutcome:
    """Run ``agent_code``'s ``propose`` once, sandboxed, and return how it ended.

    Args:
        agent_code: The agent's source (defines ``propose(task, parent, feedback, tools)``).
        task: What the agent works on.
        parent: The code the agent starts from.
        feedback: Plain JSON data about the parent (score, metrics, errors).
        tools: The controller-side tool handlers.
        budget: The limits enforced outside the agent.
        sandbox: ``"auto"``, ``"local"``, ``"bwrap"`` or a ``{type: ..., ...}`` mapping.

    Returns:
        The :class:`AgentOutcome`; this function does not raise for anything the agent does.
    """
    from qdevolve.agents.runtime import run_agent as _run_agent

    return _run_agent(
        agent_code,
        task=task,
        parent=parent,
        feedback=feedback,
        tools=tools,
        budget=budget,
        sandbox=sandbox,
    )
