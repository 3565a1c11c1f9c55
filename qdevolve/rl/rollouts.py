"""Groups to rollouts and back: how a trainer's groups live in the store's ``rollouts`` table.

A group becomes G rollouts sharing one ``group_id``; its outcome keys and candidate vectors
ride in ``metadata["outcome_key"]`` / ``metadata["candidate_vectors"]`` (where
:meth:`RolloutGroup.from_rollouts` reads them), its prompt ids in ``prompt_token_ids`` and
its cluster keys in ``cluster_key``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from qdevolve.db.store import LineageStore
from qdevolve.rl.group import RolloutGroup
from qdevolve.rl.sampling import encode_prompt
from qdevolve.types import Rollout, new_id

__all__ = ["groups_to_rollouts", "groups_from_store"]


def groups_to_rollouts(groups: Sequence[RolloutGroup], run_id: str, policy_version: int | None, tokenizer: Any,
                       texts: Sequence[Sequence[str]] | None = None) -> list[Rollout]:
    """:class:`~qdevolve.types.Rollout` rows of the groups (one ``group_id`` per group)."""
    out = []
    for gi, g in enumerate(groups):
        gid = g.prompt_id or new_id()
        if g.prompt_id is None:
            g.prompt_id = gid
        p_ids = list(g.metadata.get("prompt_token_ids") or (encode_prompt(tokenizer, g.prompt) if g.prompt else []))
        for i in range(g.size):
            ids = [int(t) for t in g.token_ids[i]] if g.token_ids is not None else []
            text = texts[gi][i] if texts is not None else tokenizer.decode(ids, skip_special_tokens=True)
            meta: dict[str, Any] = {}
            if g.outcome_keys is not None:
                meta["outcome_key"] = g.outcome_keys[i]
            if g.candidate_vectors is not None:
                meta["candidate_vectors"] = g.candidate_vectors[i].tolist()
            out.append(Rollout(
                prompt=g.prompt or "", completion=text, run_id=run_id, token_ids=ids,
                logprobs=[] if g.old_logprobs is None else [float(x) for x in g.old_logprobs[i]],
                policy_version=policy_version, reward=float(g.rewards[i]),
                reward_vector=None if g.reward_vectors is None else g.reward_vectors[i].tolist(),
                cluster_key=None if g.cluster_keys is None else str(g.cluster_keys[i]), group_id=gid,
                prompt_token_ids=p_ids, prompt_tokens=len(p_ids), completion_tokens=len(ids), metadata=meta))
    return out


def groups_from_store(store: LineageStore, run_id: str, *, policy_version: int | None = None,
                      after_seq: int = 0) -> tuple[list[RolloutGroup], int]:
    """Rebuild groups (by ``group_id``) from evaluated rollouts; returns them and the last seq."""
    rows = store.rollouts(run_id, policy_version=policy_version, after_seq=after_seq, evaluated_only=True)
    by_group: dict[str, list[Rollout]] = {}
    last = after_seq
    for seq, r in rows:
        by_group.setdefault(r.group_id or r.id, []).append(r)
        last = max(last, seq)
    groups = []
    for rs in by_group.values():
        g = RolloutGroup.from_rollouts(rs)
        g.metadata["prompt_token_ids"] = list(rs[0].prompt_token_ids)
        groups.append(g)
    return groups, last
