"""The inner loop: rollout groups, advantage objectives, the trainer and diversity metrics.

Importing this package is light (numpy only; torch is imported by the trainer and by loss
hooks when they are called). Objectives are plugins of kind ``objective``::

    from qdevolve import registry
    from qdevolve.rl import RolloutGroup

    group = RolloutGroup(rewards=[1, 0, 1, 1], outcome_keys=["7", "3", "7", "12"])
    adv = registry.objective.create({"type": "ips"}).advantages(group)
"""

from qdevolve.rl import metrics
from qdevolve.rl.group import GROUP_FIELDS, RolloutGroup
from qdevolve.rl.metrics import (
    SupportChange,
    answer_entropy,
    best_at_k,
    coverage_at_k,
    distinct_correct,
    effective_outcomes,
    entropy,
    exact_pass_at_k,
    js_distance,
    mean_pass_at_k,
    never_solved,
    pass_at_k,
    prompt_changes,
    support,
    support_change,
    token_entropy,
)

_LAZY = {"PolicyTrainer": "qdevolve.rl.trainer", "TrainerConfig": "qdevolve.rl.config",
         "sample_group": "qdevolve.rl.sampling"}


def __getattr__(name: str):  # torch-backed names load on first use, keeping this import light
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'qdevolve.rl' has no attribute {name!r}")


__all__ = [
    "PolicyTrainer",
    "TrainerConfig",
    "sample_group",
    "GROUP_FIELDS",
    "RolloutGroup",
    "SupportChange",
    "answer_entropy",
    "best_at_k",
    "coverage_at_k",
    "distinct_correct",
    "effective_outcomes",
    "entropy",
    "exact_pass_at_k",
    "js_distance",
    "mean_pass_at_k",
    "metrics",
    "never_solved",
    "pass_at_k",
    "prompt_changes",
    "support",
    "support_change",
    "token_entropy",
]
