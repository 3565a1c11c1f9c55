"""What one ``tell`` stores: a record built before the commit, applied to memory after it.

:meth:`~qdevolve.evolve.core.engine.Evolution.tell` builds a :class:`TellRecord` (the program,
its evaluation, archive events, the rollout with its reward, inspiration edges, the budget
claim, the run state and, every so often, the archive snapshot), commits :meth:`TellRecord.rows`
in one store transaction, and only then updates memory from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from qdevolve.db.records import EdgeRecord, EvaluationRecord
from qdevolve.evolve.training import Reward
from qdevolve.types import ArchiveEvent, EvalResult, Program, PromptTemplate, Rollout

__all__ = ["TellRecord"]


@dataclass
class TellRecord:
    """One child (or seed) as stored by ``tell``, and what memory takes from it afterwards.

    Attributes:
        run_id: The run.
        program: The program told.
        result: Its evaluation result.
        stored_before: The program row exists already (left unevaluated by an older run).
        evaluation: The evaluation row.
        edges: Extra edges (inspirations); parent edges come with the program row.
        events: What the archive did with the program.
        rollout: The completion that produced it, with its reward filled in.
        reward: The listener's reward (``None`` without a rollout).
        state: Run-state keys written in the same transaction (rng, usage, ensemble, counters).
        claim: ``(counter, n, total)`` budget claim, or ``None`` (seeds, unevaluated programs).
        snapshot: The encoded archive state when one is due, else ``None``.
        templates: Prompt templates made since the last commit (evolving prompts).
    """

    run_id: str
    program: Program
    result: EvalResult
    stored_before: bool
    evaluation: EvaluationRecord
    edges: tuple[EdgeRecord, ...]
    events: list[ArchiveEvent]
    rollout: Rollout | None
    reward: Reward | None
    state: dict[str, Any]
    claim: tuple[str, int, int] | None
    snapshot: str | None
    templates: list[PromptTemplate] = field(default_factory=list)

    def rows(self) -> dict[str, Any]:
        """Keyword arguments of :meth:`~qdevolve.db.store.LineageStore.write` (one transaction)."""
        return {"run_id": self.run_id, "programs": () if self.stored_before else [self.program],
                "edges": self.edges, "evaluations": [self.evaluation], "events": self.events,
                "rollouts": [self.rollout] if self.rollout is not None else (), "state": self.state,
                "budget": self.claim, "snapshot": self.snapshot, "templates": self.templates}
