"""Shared maths of the advantage objectives: group baselines, scaling, key counts.

Every GRPO-family objective ends with the same step (DeepSeekMath, Shao et al. 2024, as
implemented by TRL's ``GRPOTrainer``)::

    A_i = s_i - mean_j(s_j)                                scale = "none"
    A_i = (s_i - mean_j(s_j)) / (std_j(s_j) + eps)         scale = "group"
    A_i = (s_i - mean_j(s_j)) / (std_batch(s) + eps)       scale = "batch"

where ``s`` is the objective's (possibly transformed) per-completion score, the mean is over
the group, ``std`` is the Bessel-corrected standard deviation (``ddof = 1``, as torch's
``Tensor.std`` and TRL's ``nanstd``) and ``eps = 1e-4`` (TRL's constant). A group whose scores
are all equal gets exact zeros; a group of one completion gets zero.

This module imports only numpy and :mod:`qdevolve.rl.group`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from typing import ClassVar

import numpy as np

from qdevolve.rl.group import RolloutGroup

__all__ = [
    "SCALES",
    "STD_EPS",
    "ObjectiveBase",
    "ScaledObjective",
    "check_scale",
    "check_positive",
    "group_std",
    "batch_std",
    "center",
    "normalize",
    "key_counts",
]

SCALES: tuple[str, ...] = ("group", "batch", "none")
STD_EPS: float = 1e-4


def check_scale(scale: str) -> str:
    """Validate a ``scale`` setting."""
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {', '.join(SCALES)}, got {scale!r}")
    return scale


def check_positive(name: str, value: float, *, allow_zero: bool = False) -> float:
    """Validate a positive (or non-negative) finite number."""
    try:
        v = float(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a number, got {value!r}") from exc
    if not np.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be finite and {bound}, got {value!r}")
    return v


def group_std(scores: np.ndarray, ddof: int = 1) -> float:
    """Standard deviation of one group's scores (``ddof = 1``); 0 for fewer than ``ddof + 1``."""
    s = np.asarray(scores, dtype=np.float64)
    if s.size <= ddof:
        return 0.0
    return float(np.std(s, ddof=ddof))


def batch_std(groups_scores: Iterable[np.ndarray], ddof: int = 1) -> float:
    """Standard deviation of every score of a batch of groups pooled together (TRL ``batch``)."""
    pooled = [np.asarray(s, dtype=np.float64).ravel() for s in groups_scores]
    if not pooled:
        return 0.0
    return group_std(np.concatenate(pooled), ddof=ddof)


def center(scores: np.ndarray) -> np.ndarray:
    """``s - mean(s)``, with exact zeros when every score is equal."""
    s = np.asarray(scores, dtype=np.float64)
    if s.size == 0 or np.all(s == s[0]):
        return np.zeros_like(s)
    return s - s.mean()


def normalize(
    scores: np.ndarray,
    scale: str = "group",
    eps: float = STD_EPS,
    batch_std_value: float | None = None,
) -> np.ndarray:
    """GRPO's group baseline and scaling (module docstring) as float64 ``[G]``.

    Args:
        scores: Per-completion scores of one group.
        scale: ``group``, ``batch`` or ``none``.
        eps: Added to the standard deviation.
        batch_std_value: The batch's pooled std; required when ``scale == "batch"``.
    """
    adv = center(scores)
    if scale == "none":
        return adv
    if scale == "group":
        return adv / (group_std(scores) + eps)
    if scale == "batch":
        if batch_std_value is None:
            raise ValueError(
                "scale='batch' needs the whole batch: pass batch_std= to the objective or call "
                "advantages_batch(groups)"
            )
        return adv / (float(batch_std_value) + eps)
    raise ValueError(f"scale must be one of {', '.join(SCALES)}, got {scale!r}")


def key_counts(keys: Sequence[Hashable]) -> np.ndarray:
    """For each position, how many entries of ``keys`` equal its key (float64 ``[G]``)."""
    counts = Counter(keys)
    return np.asarray([counts[k] for k in keys], dtype=np.float64)


class ObjectiveBase:
    """Base of the built-in advantage objectives (kind ``objective``); each one satisfies the
    :class:`~qdevolve.rl.protocols.Objective` protocol.

    Subclasses set ``name`` and ``requires`` (the :class:`RolloutGroup` fields they need
    besides ``rewards``) and implement :meth:`advantages`.
    """

    name: ClassVar[str] = ""
    requires: frozenset[str] = frozenset()

    def check(self, group: RolloutGroup) -> RolloutGroup:
        """Raise a ``ValueError`` unless ``group`` is a group carrying every required field."""
        if not isinstance(group, RolloutGroup):
            raise ValueError(
                f"objective '{self.name}' takes a qdevolve.rl.RolloutGroup, got {type(group).__name__}"
            )
        group.require(self.requires, who=f"objective '{self.name}'")
        return group

    def advantages(self, group: RolloutGroup) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def advantages_batch(self, groups: Sequence[RolloutGroup]) -> list[np.ndarray]:
        """Advantages of several groups (one array per group)."""
        return [self.advantages(g) for g in groups]

    def __repr__(self) -> str:
        settings = ", ".join(
            f"{k}={v!r}" for k, v in sorted(vars(self).items()) if not k.startswith("_")
        )
        return f"{type(self).__name__}({settings})"


class ScaledObjective(ObjectiveBase):
    """An objective of the form ``A = normalize(score(group))`` (then optional reweighting).

    Subclasses implement :meth:`scores` (the per-completion score the baseline and scaling act
    on) and may override :meth:`reweight` (applied after scaling, e.g. Rare's ``f^-alpha``).
    """

    def __init__(
        self, *, scale: str = "group", eps: float = STD_EPS, batch_std: float | None = None
    ) -> None:
        self.scale = check_scale(scale)
        self.eps = check_positive("eps", eps, allow_zero=True)
        self.batch_std = (
            None if batch_std is None else check_positive("batch_std", batch_std, allow_zero=True)
        )

    def scores(self, group: RolloutGroup) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def reweight(self, group: RolloutGroup, advantages: np.ndarray) -> np.ndarray:
        return advantages

    def advantages(self, group: RolloutGroup) -> np.ndarray:
        """One advantage per completion, float64 ``[G]``."""
        self.check(group)
        s = self.scores(group)
        return self.reweight(group, normalize(s, self.scale, self.eps, self.batch_std))

    def advantages_batch(self, groups: Sequence[RolloutGroup]) -> list[np.ndarray]:
        """Advantages of a batch; with ``scale="batch"`` the std pools every group's scores."""
        for g in groups:
            self.check(g)
        scores = [self.scores(g) for g in groups]
        std = self.batch_std
        if self.scale == "batch" and std is None:
            std = batch_std(scores)
        return [
            self.reweight(g, normalize(s, self.scale, self.eps, std))
            for g, s in zip(groups, scores, strict=True)
        ]
