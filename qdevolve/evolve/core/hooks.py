"""Optional capabilities the engine uses when a plugin has them, declared as protocols.

* :class:`StatefulBackend` - the LLM ensemble's bandit statistics, stored with each ``tell``
  and restored on resume;
* :class:`DeadlineAware` - a backend that abandons requests in flight at the wall time;
* :class:`ChildObserver` - a selection rule that learns from the children it led to
  (``best_child``);
* :class:`DuplicateRewarding` - a training listener that rewards the rollout of a child the
  engine does not store (a copy of its parent or of a stored program), so lazy and
  duplicate children are trained on (the joined loop's graded penalties).

:func:`fixed_code_checked` applies the fixed-code rule (the EVOLVE-BLOCK may not change the
meaning of the code around it) to candidates of every operator, plugins included.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol, runtime_checkable

from qdevolve.mutation.base import Candidate
from qdevolve.mutation.crossover import CrossoverMutation
from qdevolve.mutation.diff import DiffMutation
from qdevolve.mutation.fixed_code import fixed_code_violation
from qdevolve.mutation.rewrite import RewriteMutation
from qdevolve.mutation.tree_edit import tree_violation
from qdevolve.programtree import is_tree
from qdevolve.types import Program

__all__ = ["StatefulBackend", "DeadlineAware", "ChildObserver", "DuplicateRewarding", "fixed_code_checked"]


@runtime_checkable
class StatefulBackend(Protocol):
    """A backend with state to keep across resume (the LLM ensemble's bandit statistics)."""

    def state(self) -> dict[str, Any]: ...

    def restore(self, state: dict[str, Any]) -> None: ...


@runtime_checkable
class ChildObserver(Protocol):
    """A selection rule that learns from the children it led to (``best_child``)."""

    def observe_child(self, parent_ids: Any, score: float | None) -> None: ...


@runtime_checkable
class DuplicateRewarding(Protocol):
    """A listener that rewards a copy (``program``, not stored) of the stored ``original``."""

    def duplicate_reward(self, program: Program, original: Program, result: Any) -> Any: ...


@runtime_checkable
class DeadlineAware(Protocol):
    """A backend that abandons requests in flight at the run's wall-time deadline."""

    def set_deadline(self, deadline: float) -> None: ...


# The built-in LLM operators run the check in their parse step (qdevolve.mutation._llm).
_SELF_CHECKING: tuple[type, ...] = (DiffMutation, RewriteMutation, CrossoverMutation)


def fixed_code_checked(parent: Program, cand: Candidate, operator: object) -> Candidate:
    """The candidate, or a failed one when its EVOLVE-BLOCK changes the fixed code's meaning.

    Applied to the candidates of every operator (``ast``, ``policy``, plugins); only the
    built-in LLM operators themselves, by exact class, are trusted to have checked already.
    Which operator produced a candidate is ``operator`` (the object the engine called), never
    the name a candidate gives itself, and a subclass of a built-in is checked like a plugin.
    """
    if cand.code is None:
        return cand
    if is_tree(parent.code) or is_tree(cand.code):  # every operator: per file (tree_edit)
        reason = tree_violation(parent.code, cand.code) if is_tree(parent.code) else \
            "the child of a one-file program reads as a program tree; a program keeps its form"
    elif type(operator) in _SELF_CHECKING or parent.language != "python":
        return cand
    else:
        reason = fixed_code_violation(parent.code, cand.code)
    if reason is None:
        return cand
    return dataclasses.replace(cand, code=None, error=f"rejected: {reason}")
