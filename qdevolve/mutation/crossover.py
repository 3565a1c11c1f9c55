"""Mutation ``crossover``: two parents in, one child out.

The prompt shows both parents (the first is the current program, the second comes from
``context.other_parents[0]``) and asks for a whole child program; as in ``rewrite``, only
the reply's EVOLVE-BLOCK regions are taken and spliced into the *first* parent's skeleton.
The child's ``parent_ids`` are ``(first.id, second.id)`` so both lineage edges are stored.
A reply made of SEARCH/REPLACE blocks instead is applied to the first parent
(``metadata["salvaged"] = "diff"``).
"""

from __future__ import annotations

from typing import Any

from qdevolve import registry
from qdevolve.mutation._llm import LLMMutation, ParseError
from qdevolve.mutation.rewrite import as_diff, code_from_reply, splice_into
from qdevolve.types import Program

__all__ = ["CrossoverMutation"]


@registry.mutation("crossover")
class CrossoverMutation(LLMMutation):
    """A child combining two parents (see the module docstring)."""

    name = "crossover"
    edit_format = "crossover"
    n_parents = 2

    def parent_ids(self, parent: Program, others: list[Program]) -> tuple[str, ...]:
        return (parent.id, *(p.id for p in others[:1]))

    def parse(self, reply: str, parent: Program, others: list[Program]) -> tuple[str, dict[str, Any]]:
        second = {"second_parent": others[0].id if others else None}
        try:
            child = splice_into(parent.code, code_from_reply(reply, parent.language))
        except ParseError:
            salvaged = as_diff(reply, parent)  # SEARCH/REPLACE blocks against the first parent
            if salvaged is None:
                raise
            return salvaged[0], {**salvaged[1], **second}
        if child == parent.code:
            raise ParseError("the crossover child is identical to the first parent")
        return child, second
