"""GRPO: group-relative advantages (kind ``objective``, name ``grpo``).

Formula (DeepSeekMath, Shao et al. 2024, arXiv 2402.03300; as implemented by TRL's
``GRPOTrainer`` 1.x, ``scale_rewards``)::

    A_i = r_i - mean_j r_j                                  scale = "none"
    A_i = (r_i - mean_j r_j) / (std_j r_j + eps)            scale = "group"   (default)
    A_i = (r_i - mean_j r_j) / (std_batch r + eps)          scale = "batch"

Symbols: ``r_i`` the scalar reward of completion i of the group (i = 1..G); means and group
std over the group's G completions; ``std_batch`` the std of every reward in the batch pooled
over groups; std is Bessel-corrected (ddof = 1) and ``eps = 1e-4``, both as in TRL, so the
advantages match TRL's to float precision. All-equal groups and G = 1 give zeros. The same
advantage is used for every token of the completion by the trainer's clipped surrogate.

Settings (keyword-only): ``scale`` in {"group", "batch", "none"}; ``eps``; ``batch_std``
(the pooled std when ``scale="batch"`` and groups are scored one at a time; otherwise call
:meth:`advantages_batch` with the whole batch).
"""

from __future__ import annotations

import numpy as np

from qdevolve import registry
from qdevolve.rl._common import STD_EPS, ScaledObjective
from qdevolve.rl.group import RolloutGroup

__all__ = ["GRPO"]


@registry.objective("grpo")
class GRPO(ScaledObjective):
    """Group-relative policy optimisation advantages (see module docstring)."""

    name = "grpo"
    requires = frozenset()

    def __init__(
        self, *, scale: str = "group", eps: float = STD_EPS, batch_std: float | None = None
    ) -> None:
        super().__init__(scale=scale, eps=eps, batch_std=batch_std)

    def scores(self, group: RolloutGroup) -> np.ndarray:
        return group.rewards
