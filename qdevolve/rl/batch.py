"""The trainer's batch: groups flattened to completions, with everything a step reads.

Flattened per-completion fields carry a ``b_`` prefix (CleanRL's habit) so a reader always
knows which view a line uses; ``B`` is the number of completions in the batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from qdevolve.rl.group import RolloutGroup

__all__ = ["TrainBatch"]


@dataclass
class TrainBatch:
    """One :meth:`PolicyTrainer.step`'s data.

    Attributes:
        groups: The groups it came from.
        group_advantages: The objective's advantages, one ``[G]`` array per group.
        b_prompt_ids: ``[B]`` prompt token ids of each completion.
        b_completion_ids: ``[B]`` completion token ids (end-of-sequence included).
        b_advantages: ``[B]`` float32 advantage of each completion (broadcast over its tokens).
        b_old_rows: ``[B]`` sampled old log-probs per completion, or ``None`` where unknown.
        micro_batches: Index arrays splitting ``range(B)`` into the accumulation micro-batches.
        old_logprobs: Per micro-batch ``[b, T]`` old log-probs, or ``None`` when the old
            policy is the current one (one pass per batch: reuse the current log-probs).
        ref_logprobs: Per micro-batch ``[b, T]`` reference log-probs (``beta > 0``), or ``None``.
        n_tokens: Completion tokens in the whole batch (the ``dapo`` normaliser).
    """

    groups: Sequence[RolloutGroup]
    group_advantages: list[np.ndarray]
    b_prompt_ids: list[list[int]]
    b_completion_ids: list[list[int]]
    b_advantages: torch.Tensor
    b_old_rows: list[list[float] | None]
    micro_batches: list[np.ndarray]
    old_logprobs: list[torch.Tensor] | None = None
    ref_logprobs: list[torch.Tensor] | None = None

    @property
    def size(self) -> int:
        """B, the completions in the batch."""
        return len(self.b_completion_ids)

    @property
    def n_tokens(self) -> float:
        return float(sum(len(x) for x in self.b_completion_ids))

    def micro(self, k: int) -> tuple[list[list[int]], list[list[int]]]:
        """Prompt and completion ids of micro-batch ``k``."""
        idx = self.micro_batches[k]
        return [self.b_prompt_ids[i] for i in idx], [self.b_completion_ids[i] for i in idx]
