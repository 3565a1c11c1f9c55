"""The mutation contract shared by every operator (kind ``mutation``).

An operator is a class registered with ``@registry.mutation("name")`` whose
``async propose(parent, context, backend)`` returns a list of :class:`Candidate`. A
candidate whose ``code`` is ``None`` is a failed mutation; the engine stores it with its
``error`` and ``raw`` reply so nothing the model said is lost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from qdevolve.types import EvalResult, Program

__all__ = ["Candidate", "MutationContext", "Mutation"]


@dataclass
class Candidate:
    """One proposed child.

    Attributes:
        code: The child's full source, or ``None`` when the mutation failed.
        operator: Operator name stored on the child (``diff``, ``rewrite``, ``ast``...).
        parent_ids: Parents in order (two for crossover).
        error: Why the mutation failed (``code is None``) or was rejected.
        raw: The raw model reply, kept as an artifact (truncated by the engine).
        prompt: The prompt text sent to the model, if any.
        prompt_hash: Hash of ``prompt``.
        completion: Backend completion (text, token ids, log-probs, usage, policy version),
            as a ``qdevolve.backends.base.Completion`` or ``None`` for offline operators.
        group_id: Completions for one prompt share a group id (the RL group).
        metadata: Extra JSON-serialisable data stored on the program.
    """

    code: str | None
    operator: str
    parent_ids: tuple[str, ...]
    error: str | None = None
    raw: str | None = None
    prompt: str | None = None
    prompt_hash: str | None = None
    completion: Any = None
    group_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class MutationContext:
    """What the engine hands an operator besides the parent.

    Attributes:
        rng: The run's random generator (seeded; operators draw only from it).
        parent_result: The parent's evaluation (metrics, artifacts for the prompt).
        inspirations: Other archive programs with their results, for the prompt.
        other_parents: Extra parents (``(program, result)``) for crossover operators.
        iteration: The engine's iteration counter.
        island: The parent's island.
        n: How many children to propose for this parent (the RL group size).
        settings: Per-example prompt settings (``system_message``, templates, ...).
    """

    rng: np.random.Generator
    parent_result: EvalResult | None = None
    inspirations: list[tuple[Program, EvalResult]] = field(default_factory=list)
    other_parents: list[tuple[Program, EvalResult]] = field(default_factory=list)
    iteration: int = 0
    island: int = 0
    n: int = 1
    settings: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Mutation(Protocol):
    """Protocol of kind ``mutation``. ``n_parents`` is 2 for crossover operators."""

    n_parents: int
    needs_backend: bool

    async def propose(self, parent: Program, context: MutationContext, backend: Any) -> list[Candidate]: ...
