"""Trainer settings: one frozen dataclass whose fields carry ``help`` text (TRL style).

The names follow TRL's ``GRPOConfig`` where the meaning is the same (``epsilon``,
``epsilon_high``, ``beta``, ``loss_type``, ``num_iterations``, ``max_completion_length``,
``temperature``, ``gradient_accumulation_steps``) so a setting carries over unchanged; the
help strings feed ``qdevolve train --help`` and ``docs/training.md``.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields, replace
from typing import Any

from qdevolve.errors import ConfigError

__all__ = ["TrainerConfig", "LOSS_TYPES", "config_help"]

LOSS_TYPES: tuple[str, ...] = ("grpo", "bnpo", "dr_grpo", "dapo")


@dataclass(frozen=True, kw_only=True)
class TrainerConfig:
    """Settings of :class:`qdevolve.rl.trainer.PolicyTrainer` (see each field's help)."""

    learning_rate: float = field(default=1e-3, metadata={"help": "AdamW learning rate."})
    weight_decay: float = field(default=0.0, metadata={"help": "AdamW weight decay."})
    adam_beta1: float = field(default=0.9, metadata={"help": "AdamW beta1."})
    adam_beta2: float = field(default=0.99, metadata={"help": "AdamW beta2."})
    adam_epsilon: float = field(default=1e-8, metadata={"help": "AdamW epsilon."})
    max_grad_norm: float | None = field(default=1.0, metadata={"help": "Gradient-norm clip (None: no clipping)."})
    epsilon: float = field(default=0.2, metadata={"help": "Lower clip range of the ratio: clip(rho, 1 - epsilon, ...)."})
    epsilon_high: float | None = field(
        default=None, metadata={"help": "Upper clip range (DAPO clip-higher, e.g. 0.28); None means epsilon."})
    beta: float = field(default=0.0, metadata={"help": "KL coefficient to the reference policy (k3 estimator per token)."})
    use_bias_correction_kl: bool = field(
        default=True, metadata={"help": "Multiply the per-token KL by the importance ratio rho_t (TRL's default)."})
    ref_reset_steps: int = field(
        default=0, metadata={"help": "Hard-reset the reference policy to the current policy every N optimiser "
                                     "steps (ProRL); 0 never resets."})
    reset_optimizer_on_ref_reset: bool = field(
        default=True, metadata={"help": "Also reset the optimiser state at a reference reset (ProRL)."})
    loss_type: str | None = field(
        default=None, metadata={"help": "Token normalisation: 'grpo' (mean per sequence, then over sequences), "
                                        "'bnpo' (per token over the micro-batch), 'dr_grpo' (sum / (B x "
                                        "max_completion_length)), 'dapo' (per token over the whole batch). "
                                        "None: the objective's declared loss_type (dr_grpo), else 'grpo'; a "
                                        "value set here always wins."})
    max_completion_length: int = field(
        default=16, metadata={"help": "Completion length budget in tokens (the dr_grpo normaliser)."})
    num_iterations: int | None = field(
        default=None, metadata={"help": "mu: optimiser passes over each batch of groups. None: the objective's "
                                        "declared mu (LAD), else 1; a value set here always wins."})
    gradient_accumulation_steps: int = field(
        default=1, metadata={"help": "Micro-batches per optimiser step (the batch's completions are split)."})
    temperature: float = field(default=1.0, metadata={"help": "Sampling temperature; logits are divided by it."})
    recompute_old_logprobs: bool = field(
        default=True, metadata={"help": "Old log-probs come from the current model before updating (as TRL; with "
                                        "num_iterations = 1 they are the current log-probs, detached); False uses "
                                        "the group's sampled old_logprobs."})
    use_lora: bool = field(default=False, metadata={"help": "Train LoRA adapters (peft) instead of all weights."})
    # rank 4 on every projection: RL carries few bits per episode, and low-rank LoRA on all
    # layers matched full fine-tuning for RL (Schulman et al., "LoRA Without Regret",
    # Thinking Machines Lab 2025); a SmolLM2-135M adapter is then 4.9 MB (docs/backends.md)
    lora_r: int = field(default=4, metadata={"help": "LoRA rank."})
    lora_alpha: int = field(default=8, metadata={"help": "LoRA alpha (scale alpha / r = 2)."})
    lora_dropout: float = field(default=0.0, metadata={"help": "LoRA dropout."})
    lora_target_modules: tuple[str, ...] | None = field(
        default=None, metadata={"help": "Module names LoRA adapts (default: every Linear/Conv1D projection but the "
                                        "output head, read from the model: q_proj..down_proj for Llama/Qwen, "
                                        "c_attn, c_proj, c_fc for GPT-2)."})
    seed: int = field(default=0, metadata={"help": "Seed of the trainer's torch generator."})
    device: str | None = field(
        default=None, metadata={"help": "Where to train: cpu, cuda, cuda:N or auto (None: where the model already "
                                        "is; a backend sharing the model samples there too)."})

    def __post_init__(self) -> None:
        if self.loss_type is not None and self.loss_type not in LOSS_TYPES:
            raise ConfigError(f"TrainerConfig.loss_type must be one of {', '.join(LOSS_TYPES)}, got {self.loss_type!r}")
        for name in ("num_iterations", "gradient_accumulation_steps", "max_completion_length"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ConfigError(f"TrainerConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.epsilon < 0 or (self.epsilon_high is not None and self.epsilon_high < 0):
            raise ConfigError("TrainerConfig.epsilon and epsilon_high must be >= 0")
        if self.beta < 0:
            raise ConfigError(f"TrainerConfig.beta must be >= 0, got {self.beta}")
        if self.ref_reset_steps < 0:
            raise ConfigError(f"TrainerConfig.ref_reset_steps must be >= 0, got {self.ref_reset_steps}")
        if self.temperature <= 0:
            raise ConfigError(f"TrainerConfig.temperature must be > 0, got {self.temperature}")

    @property
    def eps_high(self) -> float:
        return self.epsilon if self.epsilon_high is None else self.epsilon_high

    def replace(self, **changes: Any) -> TrainerConfig:
        return replace(self, **changes)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, where: str = "trainer config") -> TrainerConfig:
        """Build from a mapping; unknown keys are an error naming the keys that exist."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            from qdevolve.suggest import did_you_mean

            hint = did_you_mean(unknown, known)
            raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; {hint + ' ' if hint else ''}"
                              f"known: {', '.join(sorted(known))}")
        data = dict(data)
        if data.get("lora_target_modules") is not None and not isinstance(data["lora_target_modules"], tuple):
            data["lora_target_modules"] = tuple(data["lora_target_modules"])
        return cls(**data)


def config_help() -> list[tuple[str, str, str]]:
    """``(name, default, help)`` for every field (CLI and docs)."""
    rows = []
    for f in fields(TrainerConfig):
        default = f.default if f.default is not MISSING else "?"
        rows.append((f.name, repr(default), f.metadata.get("help", "")))
    return rows
