"""Reward shaping for the joined loop: graded rewards for lazy, duplicate and failed children.

A mutation policy has cheap ways to earn nothing new: copy its parent, re-emit a program
the run already holds, or write something that does not run. ThetaEvolve (arXiv
2511.23473; ``modular_utils/error_constants.py`` of its repository) gives each of these
its own reward in place of the score: no program in the reply −0.4, a lazy child (equal
to its parent, or at its "level 2" to any program in the database) −0.3, an execution
error −0.2, a validation failure −0.1. :class:`RewardShaping` holds one such reward per
*kind* of child; :func:`child_kind` names the kind of one child, in this order:

1. ``no_program``: the completion gave no program (empty, unparsable, backend error): a
   failed child, penalised like a copy when configured;
2. ``lazy``: the child's normalised code equals a parent's (:func:`qdevolve.types.code_hash`);
3. ``duplicate``: it equals any program already stored in the run;
4. ``same_class``: it evaluated ``ok`` but its strategy key (the run's ``train.cluster``; the
   ``semantic`` clusterer gives its outputs on probe inputs) equals the key of a program the
   run stored before it, within the same problem when ``train.solved_by`` names one: a new
   text of a behaviour the run already holds (the training listener decides it,
   :meth:`qdevolve.evolve.training.joined.JoinedListener.child_kind`; :func:`child_kind` here
   never returns it);
5. the evaluation status when it is not ``ok``: ``error``, ``timeout``, ``memory``,
   ``killed``, ``invalid`` (the evaluator or the archive rejected it);
6. ``ok``: the reward is left as it is.

A kind without a configured value keeps the unshaped reward, so ``RewardShaping()`` is the
identity and every penalty is opt-in. Config (``train.shaping``)::

    shaping: {preset: thetaevolve}                       # the four values above
    shaping: {lazy: -0.3, duplicate: -0.1, error: -0.2}  # or any subset, per kind
    shaping: {preset: thetaevolve, duplicate: -0.05}     # a preset with overrides

Where the loop calls it: the training listener computes the base reward of a child (its
score, improvement, or per-test mean), then ``reward = shaping(reward, child_kind(...))``.
For ``lazy`` and ``duplicate`` to ever apply, the loop must keep the rollout of a child
it does not evaluate again (a copy of a stored program) and reward it here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from qdevolve.errors import ConfigError
from qdevolve.types import code_hash

__all__ = ["KINDS", "PRESETS", "RewardShaping", "child_kind", "clipped_improvement"]

KINDS: tuple[str, ...] = ("no_program", "lazy", "duplicate", "same_class", "error", "timeout", "memory", "killed", "invalid")
PRESETS: dict[str, dict[str, float]] = {
    # ThetaEvolve's graded error rewards, mapped onto qdevolve's statuses.
    "thetaevolve": {"no_program": -0.4, "lazy": -0.3, "duplicate": -0.3, "error": -0.2, "timeout": -0.2,
                    "memory": -0.2, "killed": -0.2, "invalid": -0.1},
}


def clipped_improvement(score: float, parent_score: float | None, clip: float = 1.0) -> float:
    """The reward for improving on the parent, in [0, 1] (``train.reward: improvement_clipped``).

    ``r = clip(s_child - s_parent, 0, c) / c`` with ``s`` the evaluator's score, ``s_parent``
    the parent's score (0 when the child has none) and ``c = clip`` (``train.improvement_clip``,
    default 1: the score range of the suite). A child no better than its parent earns 0, so a
    second half-solution from a half-solved parent no longer pays as the plain score would (the
    suite's measured cause: trained arms raised the top-50 mean while solving fewer targets,
    issue 33); a full solution from an empty parent earns 1. Formula of this project.

    Raises:
        ValueError: ``clip`` is not > 0.
    """
    if not clip > 0:
        raise ValueError(f"improvement clip must be > 0, got {clip!r}")
    delta = float(score) - float(parent_score or 0.0)
    return min(max(delta, 0.0), float(clip)) / float(clip)


def child_kind(*, code: str | None, parent_codes: Iterable[str] = (), stored_hashes: Iterable[str] = (),
               status: str = "ok") -> str:
    """The shaping kind of one child (see the module docstring for the order).

    Args:
        code: The child's program, or ``None``/empty when the completion gave none.
        parent_codes: Its parents' programs.
        stored_hashes: :func:`~qdevolve.types.code_hash` of every program stored in the run
            *before* this child (a set is fastest).
        status: The child's evaluation status (``ok`` when not evaluated).
    """
    if not code:
        return "no_program"
    h = code_hash(code)
    if any(code_hash(p) == h for p in parent_codes):
        return "lazy"
    if h in stored_hashes:
        return "duplicate"
    return status if status != "ok" else "ok"


@dataclass(frozen=True)
class RewardShaping:
    """Rewards that replace a child's reward by kind (``None``: keep the reward).

    Args:
        values: ``{kind: reward}`` for kinds in :data:`KINDS`.
    """

    values: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        bad = sorted(set(self.values) - set(KINDS))
        if bad:
            raise ValueError(f"unknown shaping kind(s) {', '.join(bad)}; known: {', '.join(KINDS)}")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None, where: str = "train.shaping") -> RewardShaping:
        """Build from config: an optional ``preset`` plus per-kind rewards (one error line if bad)."""
        d = dict(d or {})
        values: dict[str, float] = {}
        preset = d.pop("preset", None)
        if preset is not None:
            if preset not in PRESETS:
                raise ConfigError(f"{where}.preset: unknown preset {preset!r}; known: {', '.join(PRESETS)}")
            values.update(PRESETS[preset])
        bad = sorted(set(d) - set(KINDS))
        if bad:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(bad)}; known keys: preset, {', '.join(KINDS)}")
        for kind, value in d.items():
            try:
                values[kind] = float(value)
            except (TypeError, ValueError):
                raise ConfigError(f"{where}.{kind}: expected a number, got {value!r}") from None
        return cls(values)

    @property
    def enabled(self) -> bool:
        return bool(self.values)

    def __call__(self, reward: float, kind: str) -> float:
        """The shaped reward of a child of ``kind`` whose unshaped reward is ``reward``."""
        if kind != "ok" and kind not in KINDS:
            raise ValueError(f"unknown child kind {kind!r}; known: ok, {', '.join(KINDS)}")
        value = self.values.get(kind)
        return float(reward) if value is None else float(value)
