"""One prompt's group of G scored completions: what every objective consumes.

A :class:`RolloutGroup` is the unit GRPO-style objectives work on: the G completions sampled
for one prompt, their scalar rewards and, depending on the objective, per-test reward
vectors (VPO, best@k), outcome keys (IPS), strategy cluster keys (Rare) or the per-candidate
reward vectors of multi-answer rollouts (VPO). Token ids, masks and old log-probs ride along
for the trainer; objectives never look at them.

Shapes (G = completions in the group, T = tests / reward components, m = candidates):

* ``rewards``: ``[G]`` float64, finite.
* ``reward_vectors``: ``[G, T]`` float64, or ``None``.
* ``outcome_keys`` / ``cluster_keys``: length-G sequences of hashable keys, or ``None``.
* ``candidate_vectors``: ``[G, m, T]`` float64, or ``None``.
* ``token_ids`` / ``masks`` / ``old_logprobs``: anything with ``len() == G`` (lists of lists,
  ``[G, L]`` arrays or tensors), or ``None``.

This module imports only numpy and :mod:`qdevolve.types`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from qdevolve.types import Rollout

__all__ = ["RolloutGroup", "GROUP_FIELDS"]

#: Fields an objective may list in its ``requires`` class attribute.
GROUP_FIELDS: tuple[str, ...] = (
    "rewards",
    "reward_vectors",
    "outcome_keys",
    "cluster_keys",
    "candidate_vectors",
    "token_ids",
    "masks",
    "old_logprobs",
)


def _float_array(name: str, value: Any, ndim: int) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"RolloutGroup.{name} must be numeric, got {type(value).__name__}: {exc}"
        ) from exc
    if arr.ndim != ndim:
        raise ValueError(
            f"RolloutGroup.{name} must have {ndim} dimension(s), got shape {arr.shape}"
        )
    if not np.all(np.isfinite(arr)):
        raise ValueError(
            f"RolloutGroup.{name} contains NaN or infinite values; give failed completions a finite "
            "reward (e.g. 0.0) before building the group"
        )
    return arr


@dataclass
class RolloutGroup:
    """The G completions of one prompt with their rewards and keys.

    Attributes:
        rewards: Scalar reward per completion, shape ``[G]``.
        reward_vectors: Per-test results per completion, shape ``[G, T]``.
        outcome_keys: Outcome identity per completion (IPS counts these), length G.
        cluster_keys: Strategy cluster per completion (Rare counts these), length G.
        candidate_vectors: Reward vector of each of the m candidates a multi-answer rollout
            emitted, shape ``[G, m, T]`` (VPO). Pad missing candidates with zero vectors.
        token_ids: Completion token ids per completion (for the trainer).
        masks: Completion masks per completion (for the trainer).
        old_logprobs: Per-token log-probs under the sampling policy (for the trainer).
        prompt: The prompt text.
        prompt_id: A stable id of the prompt (task prompt index, group id, ...).
        metadata: Free-form extras.

    Raises:
        ValueError: On a shape that does not match ``len(rewards)``, non-finite values, or an
            empty group.
    """

    rewards: np.ndarray
    reward_vectors: np.ndarray | None = None
    outcome_keys: Sequence[Hashable] | None = None
    cluster_keys: Sequence[Hashable] | None = None
    candidate_vectors: np.ndarray | None = None
    token_ids: Any = None
    masks: Any = None
    old_logprobs: Any = None
    prompt: str | None = None
    prompt_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rewards = _float_array("rewards", self.rewards, 1)
        g = self.rewards.shape[0]
        if g == 0:
            raise ValueError("RolloutGroup.rewards is empty; a group needs at least one completion")
        if self.reward_vectors is not None:
            self.reward_vectors = _float_array("reward_vectors", self.reward_vectors, 2)
            if self.reward_vectors.shape[0] != g:
                raise ValueError(
                    f"RolloutGroup.reward_vectors has {self.reward_vectors.shape[0]} rows but the group "
                    f"has G={g} rewards; expected shape [G, T] = [{g}, T]"
                )
        if self.candidate_vectors is not None:
            self.candidate_vectors = _float_array("candidate_vectors", self.candidate_vectors, 3)
            if self.candidate_vectors.shape[0] != g:
                raise ValueError(
                    f"RolloutGroup.candidate_vectors has first dimension {self.candidate_vectors.shape[0]}"
                    f" but the group has G={g} rewards; expected shape [G, m, T] = [{g}, m, T]"
                )
        for name in ("outcome_keys", "cluster_keys"):
            keys = getattr(self, name)
            if keys is None:
                continue
            if isinstance(keys, (str, bytes)):
                raise ValueError(
                    f"RolloutGroup.{name} must be a sequence of G keys, not a single string"
                )
            keys = list(keys)
            if len(keys) != g:
                raise ValueError(
                    f"RolloutGroup.{name} has {len(keys)} keys but the group has G={g} rewards"
                )
            for i, k in enumerate(keys):
                if k is None:
                    raise ValueError(
                        f"RolloutGroup.{name}[{i}] is None; every completion needs a key (use a "
                        "unique key such as its index for completions that cannot be keyed)"
                    )
                try:
                    hash(k)
                except TypeError as exc:
                    raise ValueError(f"RolloutGroup.{name}[{i}] is not hashable: {k!r}") from exc
            setattr(self, name, tuple(keys))
        for name in ("token_ids", "masks", "old_logprobs"):
            value = getattr(self, name)
            if value is None:
                continue
            try:
                n = len(value)
            except TypeError as exc:
                raise ValueError(f"RolloutGroup.{name} must have one entry per completion") from exc
            if n != g:
                raise ValueError(
                    f"RolloutGroup.{name} has {n} entries but the group has G={g} rewards"
                )

    @property
    def size(self) -> int:
        """G, the number of completions."""
        return int(self.rewards.shape[0])

    def __len__(self) -> int:
        return self.size

    def require(
        self, fields: Sequence[str] | set[str] | frozenset[str], who: str = "this objective"
    ) -> None:
        """Raise a ``ValueError`` naming every field in ``fields`` that the group lacks."""
        missing = sorted(f for f in fields if getattr(self, f, None) is None)
        if missing:
            raise ValueError(
                f"{who} needs RolloutGroup field(s) {', '.join(missing)} but the group "
                f"(prompt_id={self.prompt_id!r}, G={self.size}) does not carry them; "
                + "; ".join(_HOW_TO_FILL.get(f, f"set {f}") for f in missing)
            )

    @classmethod
    def from_rollouts(
        cls,
        rollouts: Sequence[Rollout],
        *,
        cluster: Callable[[Rollout], str] | None = None,
        outcome: Callable[[Rollout], Hashable] | None = None,
        missing_reward: float | None = None,
    ) -> RolloutGroup:
        """Build a group from stored :class:`~qdevolve.types.Rollout` records of one prompt.

        ``rewards`` come from ``rollout.reward``; ``reward_vectors`` from ``reward_vector`` when
        every rollout has one; ``cluster_keys`` from ``cluster(rollout)`` when a clusterer is
        given, else from ``rollout.cluster_key`` when all are set; ``outcome_keys`` from
        ``outcome(rollout)`` when given, else ``metadata["outcome_key"]`` when all are set;
        ``candidate_vectors`` from ``metadata["candidate_vectors"]`` when all are set; token
        ids and old log-probs from the rollouts.

        Args:
            rollouts: The G rollouts, in order.
            cluster: A ``cluster`` plugin (callable on a rollout) for ``cluster_keys``.
            outcome: A callable giving each rollout's outcome key.
            missing_reward: Reward used for rollouts whose ``reward`` is ``None``; without it a
                missing reward is an error.
        """
        if not rollouts:
            raise ValueError("RolloutGroup.from_rollouts needs at least one rollout")
        rewards = []
        for r in rollouts:
            if r.reward is None:
                if missing_reward is None:
                    raise ValueError(
                        f"rollout {r.id} has no reward; evaluate it first or pass missing_reward="
                    )
                rewards.append(float(missing_reward))
            else:
                rewards.append(float(r.reward))
        vectors = None
        if all(r.reward_vector is not None for r in rollouts):
            vectors = [list(r.reward_vector or []) for r in rollouts]
        if cluster is not None:
            ckeys: list[Hashable] | None = [cluster(r) for r in rollouts]
        elif all(r.cluster_key is not None for r in rollouts):
            ckeys = [r.cluster_key for r in rollouts]
        else:
            ckeys = None
        if outcome is not None:
            okeys: list[Hashable] | None = [outcome(r) for r in rollouts]
        elif all(r.metadata.get("outcome_key") is not None for r in rollouts):
            okeys = [r.metadata["outcome_key"] for r in rollouts]
        else:
            okeys = None
        cands = None
        if all(r.metadata.get("candidate_vectors") is not None for r in rollouts):
            cands = [r.metadata["candidate_vectors"] for r in rollouts]
        first = rollouts[0]
        return cls(
            rewards=np.asarray(rewards, dtype=np.float64),
            reward_vectors=vectors,
            outcome_keys=okeys,
            cluster_keys=ckeys,
            candidate_vectors=cands,
            token_ids=[list(r.token_ids) for r in rollouts],
            old_logprobs=[list(r.logprobs) for r in rollouts],
            prompt=first.prompt,
            prompt_id=first.group_id,
        )


_HOW_TO_FILL = {
    "reward_vectors": "reward_vectors: per-test results, shape [G, T] (EvalResult.tests)",
    "outcome_keys": "outcome_keys: one outcome identity per completion (e.g. the answer, or the "
    "'outcome' cluster plugin)",
    "cluster_keys": "cluster_keys: one strategy key per completion from a cluster plugin "
    "(qdevolve.registry.cluster.create({'type': 'ast_shape'}))",
    "candidate_vectors": "candidate_vectors: per-candidate reward vectors, shape [G, m, T]",
    "old_logprobs": "old_logprobs: per-token log-probs of the sampling policy",
    "token_ids": "token_ids: completion token ids",
    "masks": "masks: completion masks",
}
