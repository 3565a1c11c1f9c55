"""The breeder records each rollout's group size (``metadata["group_n"]``): the number of the
plan's children carrying a rollout in that group, so the trainer waits for all of them."""

from __future__ import annotations

import numpy as np

from qdevolve.backends.base import Completion
from qdevolve.evolve.core.breeder import Breeder, ChildPlan
from qdevolve.mutation.base import Candidate, MutationContext
from qdevolve.types import Program


def _cand(parent: Program, group: str | None, *, code: str | None = "x = 1", completion: bool = True) -> Candidate:
    comp = Completion(text="x = 1", token_ids=[1], logprobs=[-1.0]) if completion else None
    return Candidate(code=code, operator="policy", parent_ids=(parent.id,), completion=comp, group_id=group)


def test_group_n_counts_the_plans_rollouts_per_group() -> None:
    breeder = Breeder.__new__(Breeder)
    breeder.run_id = "run"
    parent = Program(code="x = 0", run_id="run")
    ctx = MutationContext(rng=np.random.default_rng(0), n=6)
    plan = ChildPlan(0, None, "policy", parent, ctx, 6)  # type: ignore[arg-type]
    cands = [_cand(parent, "g1"), _cand(parent, "g1", code=None), _cand(parent, "g1"),
             _cand(parent, "g2"), _cand(parent, "g1", completion=False),  # a backend error: no rollout
             _cand(parent, None)]  # no group id: a group of its own, no group_n
    children = breeder.children(plan, cands)
    got = [(c.rollout.group_id, c.rollout.metadata.get("group_n")) for c in children if c.rollout is not None]
    assert got == [("g1", 3), ("g1", 3), ("g1", 3), ("g2", 1), (None, None)]
