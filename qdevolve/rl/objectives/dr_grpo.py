"""Dr. GRPO: GRPO without the std division (kind ``objective``, name ``dr_grpo``).

Formula (Liu et al. 2025, "Understanding R1-Zero-Like Training: A Critical Perspective",
arXiv 2503.20783; TRL ``loss_type="dr_grpo"`` with ``scale_rewards="none"``)::

    A_i = r_i - mean_j r_j

Symbols: ``r_i`` the scalar reward of completion i of a group of G. Dividing by the group std
gives easy and hard questions (low std) extra weight; Dr. GRPO removes it. Its second change,
a constant token normaliser (sum of token losses divided by batch size x maximum completion
length instead of per-sequence length), lives in the trainer's loss aggregation; the class
attribute ``loss_type = "dr_grpo"`` names it for trainers that honour the hint.

Settings: none.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from qdevolve import registry
from qdevolve.rl._common import ObjectiveBase, center
from qdevolve.rl.group import RolloutGroup

__all__ = ["DrGRPO"]


@registry.objective("dr_grpo")
class DrGRPO(ObjectiveBase):
    """Mean-baseline advantages without std scaling (see module docstring)."""

    name = "dr_grpo"
    requires = frozenset()
    loss_type: ClassVar[str] = "dr_grpo"

    def __init__(self) -> None:
        pass

    def advantages(self, group: RolloutGroup) -> np.ndarray:
        """``r - mean(r)``, float64 ``[G]``."""
        self.check(group)
        return center(group.rewards)
