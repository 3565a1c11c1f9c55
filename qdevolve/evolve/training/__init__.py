"""Training while evolving: the listener protocol the engine calls (:class:`TrainingListener`:
the reward of each child's rollout, ``after_job``, when to step) and its joined
implementation (:class:`JoinedListener`: the policy trainer, its locked shared backend and
the RL groups).

Uses :mod:`qdevolve.evolve.setup` (the ``train`` section of the config); the engine in
:mod:`qdevolve.evolve.core` depends on the protocol here, never the other way.
"""

from qdevolve.evolve.training.joined import JoinedListener
from qdevolve.evolve.training.listener import Reward, RewardCounting, TrainingListener, score_reward
from qdevolve.evolve.training.settings import (
           REWARDS,
           TrainSettings,
           apply_policy_options,
)

__all__ = ["TrainingListener", "Reward", "RewardCounting", "score_reward",
           "JoinedListener", "TrainSettings", "apply_policy_options", "REWARDS"]
