"""The joined run's ``train`` settings, and the ``--policy``/``--train-*`` flags folded into them.

``train`` settings (``config.yaml`` section or the ``--policy``/``--train-objective``/
``--train-every``/``--objective-arg`` flags): ``policy`` (``tiny``, a Hugging Face model
directory written as a path such as ``./model``, or ``vllm:PATH``:
:mod:`qdevolve.evolve.setup.policy_spec`), ``base_seed`` (the tiny base's own seed, default 0,
separate from the run's ``--seed``), ``task`` (the tiny policy's task, default ``expr_dsl``),
``objective`` (``{type: ips, ...}``), ``every``, ``reward``, ``invalid_reward``,
``cluster``, ``shaping``, ``enabled`` (``false`` or ``run --no-train``: the same run as a
control, the policy operator sampling the base, which is never updated), ``outcome`` (IPS's outcome identity: ``text`` of the completion or its
``behaviour``), ``correct_threshold`` (reward counted as correct for D_n), ``solved_by`` (a feature naming the
problem a program solves, e.g. ``target`` in a problem suite: every policy version's metrics
then carry ``targets_solved``, the problems with a program scoring at least
``correct_threshold`` so far, shown per version in the run summary), ``trainer``
(:class:`qdevolve.rl.config.TrainerConfig` fields), ``operator`` (options of the
``policy`` mutation operator: ``prompt_template``, ``block_template``, ``temperature``...).

:func:`apply_policy_options` keeps every mutation operator that samples the backend (``block``,
``diff``, ``rewrite``, ``policy``...: each reply is a rollout of the trained policy) and adds the
``policy`` operator only to a config that has none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from qdevolve import registry
from qdevolve.errors import ConfigError, PluginError
from qdevolve.evolve.setup import RunConfig, policy_path

__all__ = ["REWARDS", "TrainSettings", "apply_policy_options"]

REWARDS = ("score", "improvement", "improvement_clipped", "tests", "binary")


@dataclass(frozen=True, kw_only=True)
class TrainSettings:
    """The ``train`` section, validated."""

    policy: str = "tiny"
    task: str = "expr_dsl"
    objective: dict[str, Any] = field(default_factory=lambda: {"type": "grpo"})
    every: int = 32
    reward: str = "score"
    improvement_clip: float = 1.0  # c of reward: improvement_clipped (qdevolve.rl.shaping.clipped_improvement)
    invalid_reward: float = 0.0
    cluster: dict[str, Any] = field(default_factory=lambda: {"type": "archive_cell"})
    correct_threshold: float = 1.0
    outcome: str = "text"
    trainer: dict[str, Any] = field(default_factory=dict)
    group_size: int | None = None
    operator: dict[str, Any] = field(default_factory=dict)
    backend: dict[str, Any] = field(default_factory=dict)
    shaping: dict[str, Any] | None = None
    checkpoint_dir: str | None = None  # policy weights: qdevolve.rl.checkpoints.policy_dir
    max_samples: int | None = None
    solved_by: str | None = None  # a feature naming a program's problem: versions count problems solved
    enabled: bool = True  # False (--no-train): the same joined run as a control, the base never updated
    base_seed: int = 0  # the tiny base's own seed (initialisation, pre-training data), not the run's seed

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None, where: str = "train") -> TrainSettings:
        d = dict(d or {})
        known = set(cls.__dataclass_fields__)
        bad = sorted(set(d) - known)
        if bad:
            from qdevolve.suggest import did_you_mean

            hint = did_you_mean(bad, known)
            raise ConfigError(f"{where}: unknown key(s) {', '.join(bad)}; {hint + ' ' if hint else ''}"
                              f"known keys: {', '.join(sorted(known))}")
        for key in ("objective", "cluster"):
            if isinstance(d.get(key), str):
                d[key] = {"type": d[key]}
        s = cls(**d)
        if s.reward not in REWARDS:
            raise ConfigError(f"{where}.reward must be one of {', '.join(REWARDS)}, got {s.reward!r}")
        if s.outcome not in ("text", "behaviour"):
            raise ConfigError(f"{where}.outcome must be 'text' or 'behaviour', got {s.outcome!r}")
        if isinstance(s.improvement_clip, bool) or not isinstance(s.improvement_clip, (int, float)) \
                or not s.improvement_clip > 0:
            raise ConfigError(f"{where}.improvement_clip must be a number > 0, got {s.improvement_clip!r}")
        if s.group_size is not None and (isinstance(s.group_size, bool) or int(s.group_size) < 1):
            raise ConfigError(f"{where}.group_size must be an integer >= 1, got {s.group_size!r}")
        from qdevolve.rl.shaping import RewardShaping

        RewardShaping.from_dict(s.shaping, f"{where}.shaping")  # one error line at config time
        if s.every < 1:
            raise ConfigError(f"{where}.every must be >= 1, got {s.every}")
        if s.objective.get("type") == "es" and s.policy.startswith("vllm:"):
            raise ConfigError(f"{where}.objective: 'es' perturbs the policy's weights in process; use an "
                              "in-process policy (tiny or a model directory), not " + repr(s.policy))
        policy_path(s.policy, f"{where}.policy")  # a name or a path, never a guess
        if not isinstance(s.enabled, bool):
            raise ConfigError(f"{where}.enabled must be true or false, got {s.enabled!r}")
        if isinstance(s.base_seed, bool) or not isinstance(s.base_seed, int):
            raise ConfigError(f"{where}.base_seed must be an integer, got {s.base_seed!r}")
        if s.max_samples is not None and (isinstance(s.max_samples, bool) or int(s.max_samples) < 1):
            raise ConfigError(f"{where}.max_samples must be an integer >= 1, got {s.max_samples!r}")
        return s


def _parse_value(text: str) -> Any:
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def apply_policy_options(config: RunConfig, *, policy: str | None, objective: str | None,
                         every: int | None, objective_args: tuple[str, ...] = ()) -> RunConfig:
    """Fold the ``--policy``/``--train-*`` flags into the config's ``train`` section."""
    train = dict(config.train or {})
    if policy:
        train["policy"] = policy
    obj = dict(train.get("objective") or {"type": "grpo"}) if not isinstance(train.get("objective"), str) \
        else {"type": train["objective"]}
    if objective:
        obj = {"type": objective} if obj.get("type") != objective else obj
    for item in objective_args:
        if "=" not in item:
            raise ConfigError(f"--objective-arg {item!r}: expected KEY=VALUE")
        k, v = item.split("=", 1)
        obj[k.strip()] = _parse_value(v)
    train["objective"] = obj
    if every:
        train["every"] = every
    TrainSettings.from_dict(train)
    # Every model call is a rollout: operators that sample the backend (block, diff, rewrite,
    # policy...) are kept and sample the trained policy; a config with none gets the policy operator.
    mutation = [dict(m) for m in config.mutation] if any(_samples_model(m) for m in config.mutation) \
        else [{"type": "policy", "weight": 1.0, **dict(train.get("operator") or {})}]
    backend = {"type": "transformers", "policy": train.get("policy", "tiny")}
    return config.with_overrides(train=train, mutation=mutation, backend=backend)


def _samples_model(spec: dict[str, Any]) -> bool:
    """Whether the mutation operator ``spec`` names asks the backend for completions."""
    try:
        cls = registry.mutation.get(str(spec.get("type")))
    except PluginError:  # an unknown name is reported where the operators are built, with a hint
        return False
    return bool(getattr(cls, "needs_backend", False))
