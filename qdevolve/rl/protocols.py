"""What the trainers ask of an objective plugin: one required protocol, declared options.

An advantage objective (:class:`Objective`) maps a group to one advantage per completion.
It may also offer any of these declared capabilities, each a protocol of its own, read
once by :meth:`ObjectiveHints.of` when a trainer is built (never probed mid-step):

* :class:`BatchAdvantages` - ``advantages_batch(groups)`` sees the whole batch (e.g. a
  batch-level normaliser);
* :class:`LossTypeHint` - ``loss_type``: the token normalisation its paper uses (Dr. GRPO);
* :class:`EpochsHint` - ``mu``: update epochs per batch it expects (LAD);
* :class:`GroupFilter` - ``select_groups(groups)`` drops groups before the batch is built
  (Reinforce-Rej rejects all-correct and all-wrong prompts);
* :class:`LossOverride` - ``loss_override(logp, old_logp, advantages)`` replaces the
  clipped surrogate per token (LAD).

A parameter-space objective (:class:`ParameterObjective`, e.g. ``es``) updates the model
itself and is driven by :class:`~qdevolve.rl.es.ESTrainer`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from qdevolve.rl.group import RolloutGroup

__all__ = ["Objective", "BatchAdvantages", "LossTypeHint", "EpochsHint", "LossOverride", "ParameterObjective",
           "ObjectiveHints"]


@runtime_checkable
class Objective(Protocol):
    """An advantage objective: ``advantages(group) -> [G]``, one advantage per completion.

    The trainer calls :meth:`advantages` once per :class:`~qdevolve.rl.group.RolloutGroup` (the
    G completions of one prompt) and weights every token of completion ``i`` by the ``i``-th
    advantage in its clipped surrogate (PPO, Schulman et al. 2017, arXiv 1707.06347). Register
    the class with ``@qdevolve.registry.objective("name")``; keyword-only ``__init__``
    arguments are its settings (``--objective-arg KEY=VALUE``, ``train.objective`` in a config).

    ``requires`` names the group fields the objective reads beyond ``rewards`` (a subset of
    :data:`~qdevolve.rl.group.GROUP_FIELDS`); ``group.require(self.requires, who=...)`` turns
    a missing one into an error naming the objective and the field. What an objective may read from the group, with shapes (G completions, T tests,
    m candidates):

    * ``rewards`` - ``[G]`` float64, finite: the scalar reward of each completion (always set);
    * ``reward_vectors`` - ``[G, T]`` float64 or ``None``: per-test results (VPO, best@k);
    * ``outcome_keys`` - G hashable keys or ``None``: what each completion answered, so equal
      keys are the same outcome (IPS counts them);
    * ``cluster_keys`` - G hashable keys or ``None``: the strategy cluster of each completion
      (a ``cluster`` plugin's key; Rare counts them);
    * ``candidate_vectors`` - ``[G, m, T]`` float64 or ``None``: each candidate's reward
      vector when a completion emits several (VPO);
    * ``token_ids``, ``masks``, ``old_logprobs`` - per-completion sequences for the trainer;
      an objective reading them must list them in ``requires``;
    * ``prompt``, ``prompt_id`` (str or ``None``) and ``metadata`` (dict) - the prompt, a
      stable id of it, free-form extras.

    The returned array has shape ``[G]`` and finite values; an all-zero array means the group
    teaches nothing (GRPO on an all-equal group). The optional capabilities (module
    docstring) are separate protocols, read once when the trainer is built.
    """

    requires: frozenset[str]

    def advantages(self, group: RolloutGroup) -> np.ndarray: ...


@runtime_checkable
class BatchAdvantages(Protocol):
    def advantages_batch(self, groups: Sequence[RolloutGroup]) -> Sequence[np.ndarray]: ...


@runtime_checkable
class LossTypeHint(Protocol):
    loss_type: str


@runtime_checkable
class EpochsHint(Protocol):
    mu: int


@runtime_checkable
class LossOverride(Protocol):
    def loss_override(self, logprobs: Any, old_logprobs: Any, advantages: Any) -> Any: ...


@runtime_checkable
class GroupFilter(Protocol):
    """Drops groups before the batch is built (Reinforce-Rej's all-correct/all-wrong filter)."""

    def select_groups(self, groups: Sequence[RolloutGroup]) -> Sequence[RolloutGroup]: ...


@runtime_checkable
class ParameterObjective(Protocol):
    """A parameter-space method: ``update(model, evaluate_fn, iteration=...) -> stats``."""

    iteration: int

    def update(self, model: Any, evaluate_fn: Callable[[Any], float], *, iteration: int | None = None) -> dict[str, Any]: ...


@dataclass(frozen=True)
class ObjectiveHints:
    """The optional capabilities an advantage objective declares, resolved once."""

    advantages_batch: Callable[[Sequence[RolloutGroup]], Sequence[np.ndarray]] | None = None
    loss_type: str | None = None
    mu: int | None = None
    loss_override: Callable[[Any, Any, Any], Any] | None = None
    select_groups: Callable[[Sequence[RolloutGroup]], Sequence[RolloutGroup]] | None = None

    @classmethod
    def of(cls, objective: Objective) -> ObjectiveHints:
        return cls(
            advantages_batch=objective.advantages_batch if isinstance(objective, BatchAdvantages) else None,
            loss_type=(objective.loss_type or None) if isinstance(objective, LossTypeHint) else None,
            mu=int(objective.mu) if isinstance(objective, EpochsHint) and objective.mu else None,
            loss_override=objective.loss_override if isinstance(objective, LossOverride) else None,
            select_groups=objective.select_groups if isinstance(objective, GroupFilter) else None)
