"""The policy trainer: a clipped-surrogate update of a Hugging Face causal LM from rollout groups.

For each batch of :class:`~qdevolve.rl.group.RolloutGroup` (one prompt's G completions each)
the objective plugin gives one advantage per completion, ``A_i``, broadcast to the
completion's tokens. The per-token loss is the PPO/GRPO clipped surrogate (DeepSeekMath,
Shao et al. 2024; DAPO's decoupled clip, Yu et al. 2025), as TRL's ``GRPOTrainer`` computes
it::

    rho_t   = exp(log pi_theta(o_t) - log pi_old(o_t))
    l_t     = -min(rho_t A_i, clip(rho_t, 1 - epsilon, 1 + epsilon_high) A_i)
            + beta * (exp(log pi_ref - log pi_theta) - (log pi_ref - log pi_theta) - 1)   (k3 KL)
              [x rho_t when use_bias_correction_kl, TRL's default]

aggregated by ``loss_type``: ``grpo`` = mean over each sequence's tokens then over sequences;
``bnpo`` = mean over the micro-batch's tokens; ``dr_grpo`` = sum / (B x max_completion_length)
(Liu et al. 2025, Dr. GRPO); ``dapo`` = sum / active tokens of the whole batch. An objective
may replace the surrogate term with its ``loss_override(logp, old_logp, A)`` hook (LAD).

Who decides: a :class:`TrainerConfig` field left ``None`` (``loss_type``,
``num_iterations``) lets the objective's declared hint decide (Dr. GRPO's ``loss_type``,
LAD's ``mu``), else the default (``grpo``, 1); a value the user sets always wins, even one
equal to the default. Hints are read once (:class:`~qdevolve.rl.protocols.ObjectiveHints`).

The reference policy is a frozen copy of the initial policy, hard-reset to the current one
every ``ref_reset_steps`` optimiser steps together with the optimiser state (ProRL, Liu et
al. 2025, arXiv 2505.24864); a reset inside a multi-epoch step recomputes the reference
log-probs, so the remaining epochs use the new reference. Each call of
:meth:`PolicyTrainer.step` makes ``num_iterations`` (mu) optimiser steps over the batch,
each accumulating ``gradient_accumulation_steps`` micro-batches.

Checkpoints live in :mod:`qdevolve.rl.checkpoints`, the group<->rollout conversion in
:mod:`qdevolve.rl.rollouts`, the batch in :mod:`qdevolve.rl.batch`; parameter-space
objectives (``es``) are driven by :class:`qdevolve.rl.es.ESTrainer`.
"""

from __future__ import annotations

import copy
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from qdevolve.backends.adapters import BaseIdentity
from qdevolve.backends.device import model_device, place
from qdevolve.db.store import LineageStore
from qdevolve.errors import ConfigError
from qdevolve.rl import checkpoints
from qdevolve.rl.batch import TrainBatch
from qdevolve.rl.checkpoints import policy_dir
from qdevolve.rl.config import TrainerConfig
from qdevolve.rl.es import ESTrainer
from qdevolve.rl.group import RolloutGroup
from qdevolve.rl.protocols import Objective, ObjectiveHints, ParameterObjective
from qdevolve.rl.rollouts import groups_from_store, groups_to_rollouts
from qdevolve.rl.sampling import completion_logprobs, encode_prompt, sample_batch, sample_group
from qdevolve.types import Rollout

__all__ = ["PolicyTrainer", "TrainBatch", "surrogate_loss", "sample_group", "sample_batch", "groups_to_rollouts",
           "groups_from_store", "policy_dir"]


def surrogate_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
                   *, epsilon: float, epsilon_high: float, loss_type: str, beta: float = 0.0,
                   ref_logp: torch.Tensor | None = None, max_completion_length: int = 1,
                   normalizer: float | None = None, per_token_hook: Any = None,
                   kl_ratio_correction: bool = False) -> tuple[torch.Tensor, dict[str, float]]:
    """The aggregated loss of one micro-batch (module docstring) and its statistics.

    Args:
        logp, old_logp, mask: ``[B, T]`` current / old per-token log-probs and completion mask.
        advantages: ``[B]`` (broadcast over tokens) or ``[B, T]``.
        normalizer: For ``dapo``: the active-token count of the whole batch (default: this
            micro-batch's).
        per_token_hook: ``hook(logp, old_logp, advantages[B, T], mask) -> [B, T]`` replacing
            the clipped surrogate term (the KL term is still added).
        kl_ratio_correction: Multiply the k3 KL by rho_t (importance-sampling correction for
            a KL estimated on samples of pi_old; TRL's ``use_bias_correction_kl``).
    """
    adv = advantages if advantages.dim() == 2 else advantages[:, None]
    ratio = torch.exp(logp - old_logp)
    if per_token_hook is not None:
        per_token = per_token_hook(logp, old_logp, adv.expand_as(logp), mask)
    else:
        clipped = torch.clamp(ratio, 1 - epsilon, 1 + epsilon_high)
        per_token = -torch.min(ratio * adv, clipped * adv)
    kl = None
    if beta != 0.0:
        if ref_logp is None:
            raise ValueError("beta > 0 needs ref_logp")
        d = ref_logp - logp
        kl = torch.exp(d) - d - 1
        if kl_ratio_correction:
            kl = kl * ratio
        per_token = per_token + beta * kl
    if loss_type == "grpo":
        loss = ((per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
    elif loss_type == "bnpo":
        loss = (per_token * mask).sum() / mask.sum().clamp(min=1.0)
    elif loss_type == "dr_grpo":
        loss = (per_token * mask).sum() / (per_token.shape[0] * max_completion_length)
    elif loss_type == "dapo":
        denom = mask.sum().clamp(min=1.0) if normalizer is None else max(float(normalizer), 1.0)
        loss = (per_token * mask).sum() / denom
    else:
        raise ValueError(f"unknown loss_type {loss_type!r}")
    with torch.no_grad():
        n = mask.sum().clamp(min=1.0)
        low = ((ratio < 1 - epsilon) & (adv < 0)).float()
        high = ((ratio > 1 + epsilon_high) & (adv > 0)).float()
        stats = {"clip_fraction": float(((low + high) * mask).sum() / n),
                 "ratio_mean": float((ratio * mask).sum() / n),
                 "kl": float((kl * mask).sum() / n) if kl is not None else 0.0}
    return loss, stats


class PolicyTrainer:
    """Clipped-surrogate trainer over rollout groups with a pluggable objective.

    Example::

        trainer = PolicyTrainer(model, tokenizer, registry.objective.create("grpo"), TrainerConfig())
        stats = trainer.step(groups)          # one update on a batch of RolloutGroups

    Args:
        model: A ``transformers`` causal LM (trained in place; wrapped with LoRA when
            ``config.use_lora``).
        tokenizer: Its tokenizer (``pad_token_id``/``eos_token_id`` set).
        objective: An :class:`~qdevolve.rl.protocols.Objective` (or, for :meth:`es_step`, a
            :class:`~qdevolve.rl.protocols.ParameterObjective` such as ``es``).
        config: :class:`TrainerConfig`.
        store: Lineage store for rollouts and policy versions (optional).
        run_id: The run the versions and rollouts belong to (created when missing).
        ref_model: Reference policy for the KL term (default: a frozen copy of ``model``).
        device: Where to train (``cpu``, ``cuda``, ``auto``; default: where ``model`` already is),
            through :func:`qdevolve.backends.device.place`, the backends' own path; when a
            backend later moves the shared model, the trainer follows it (:meth:`follow_device`).
        base: A LoRA run's base identity (default: read from ``model``'s directory,
            :func:`~qdevolve.backends.adapters.identity_of_model`).

    Raises:
        ConfigError: the objective is neither kind.
    """

    def __init__(self, model: Any, tokenizer: Any, objective: Objective | ParameterObjective,
                 config: TrainerConfig | None = None, *, store: LineageStore | None = None,
                 run_id: str | None = None, ref_model: Any = None, device: Any = None,
                 base: BaseIdentity | None = None) -> None:
        self.config = config or TrainerConfig()
        self.objective = objective
        self.es: ESTrainer | None = None  # set for a parameter-space objective: es_step() drives it
        if isinstance(objective, Objective):
            self.hints = ObjectiveHints.of(objective)
        elif isinstance(objective, ParameterObjective):
            self.hints = ObjectiveHints()
        else:
            raise ConfigError(f"objective {objective!r} has neither advantages(group) nor update(model, evaluate_fn)")
        self.tokenizer = tokenizer
        self.device = place(model, device if device is not None else self.config.device)  # the backends' path too
        self.base: BaseIdentity | None = base  # a LoRA run's base (versions are adapters of it)
        if checkpoints.is_adapter_model(model) or self.config.use_lora:
            from qdevolve.rl.lora import wrap_lora

            if self.base is None and not checkpoints.is_adapter_model(model):
                from qdevolve.backends.adapters import identity_of_model

                self.base = identity_of_model(model)  # None: saved beside the versions at the first save
            model = wrap_lora(model, self.config)
        self.model = model
        # None in the config: the objective decides; a value the user set always wins.
        self.loss_type: str = self.config.loss_type or self.hints.loss_type or "grpo"
        self.num_iterations: int = self.config.num_iterations or self.hints.mu or 1
        self.ref_model = ref_model
        if self.config.beta > 0 and self.ref_model is None:
            self.ref_model = self._frozen_copy()
        self.optimizer = self._new_optimizer()
        self.store, self.run_id = store, run_id
        if store is not None and run_id is None:
            self.run_id = store.create_run(name="train", config={"trainer": self._config_dict()})
        if isinstance(objective, ParameterObjective) and not isinstance(objective, Objective):
            self.es = ESTrainer(self.model, tokenizer, objective, store=store, run_id=self.run_id)
        self.global_step = 0
        self.version: int | None = None
        self.generator = torch.Generator().manual_seed(self.config.seed)

    # -- setup --------------------------------------------------------------------------
    @property
    def objective_name(self) -> str:
        name = getattr(self.objective, "name", None)  # registry-built objectives carry their name
        return str(name) if name else type(self.objective).__name__

    def _config_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return {**asdict(self.config), "objective": self.objective_name}

    def _frozen_copy(self) -> Any:
        ref = copy.deepcopy(self.model)
        ref.eval()
        for p in ref.parameters():
            p.requires_grad_(False)
        return ref

    def _new_optimizer(self) -> torch.optim.Optimizer:
        params = [p for p in self.model.parameters() if p.requires_grad]
        c = self.config
        return torch.optim.AdamW(params, lr=c.learning_rate, betas=(c.adam_beta1, c.adam_beta2),
                                 eps=c.adam_epsilon, weight_decay=c.weight_decay)

    def follow_device(self) -> Any:
        """The model's device now (:func:`~qdevolve.backends.device.model_device`). When a backend
        sharing the model moved it (``TransformersBackend(model, device="cuda")``), the reference
        policy and the optimiser's moments are moved after it, so the next step runs there."""
        dev = model_device(self.model)
        if dev != self.device:
            if self.ref_model is not None:
                place(self.ref_model, dev)
            for st in self.optimizer.state.values():
                for k, v in st.items():
                    if torch.is_tensor(v) and k != "step":
                        st[k] = v.to(dev)
            self.device = dev
        return dev

    def reset_reference(self) -> None:
        """Hard-reset the reference policy to the current one (and the optimiser, per config)."""
        if self.ref_model is not None:
            self.ref_model.load_state_dict(self.model.state_dict())
        if self.config.reset_optimizer_on_ref_reset:
            self.optimizer = self._new_optimizer()

    # -- ES -----------------------------------------------------------------------------
    @property
    def is_es(self) -> bool:
        """True for parameter-space objectives (``es``): use :meth:`es_step`, not :meth:`step`."""
        return self.es is not None

    def es_step(self, evaluate_fn: Callable[[Any], float]) -> dict[str, float]:
        """One ES iteration through :class:`~qdevolve.rl.es.ESTrainer`, counted as a step."""
        if self.es is None:
            raise ConfigError(f"objective {self.objective_name!r} is not a parameter-space objective; "
                              "use step(groups)")
        stats = self.es.step(evaluate_fn)
        self.global_step = self.es.global_step
        return stats

    # -- the batch ----------------------------------------------------------------------
    def _prompt_ids(self, group: RolloutGroup) -> list[int]:
        ids = group.metadata.get("prompt_token_ids")
        if ids:
            return list(ids)
        if group.prompt is None:
            raise ValueError(f"group {group.prompt_id!r} has neither prompt text nor metadata['prompt_token_ids']")
        return encode_prompt(self.tokenizer, group.prompt)

    def _advantages(self, groups: Sequence[RolloutGroup]) -> list[np.ndarray]:
        if self.hints.advantages_batch is not None:
            return [np.asarray(a, dtype=np.float64) for a in self.hints.advantages_batch(groups)]
        return [np.asarray(self.objective.advantages(g), dtype=np.float64) for g in groups]  # type: ignore[union-attr]

    def batch(self, groups: Sequence[RolloutGroup]) -> TrainBatch:
        """Flatten groups into a :class:`TrainBatch` with advantages, old and reference log-probs."""
        if not groups:
            raise ValueError("PolicyTrainer needs at least one group")
        if self.es is not None:
            raise ConfigError("objective 'es' updates parameters directly; call es_step(evaluate_fn)")
        self.follow_device()
        advs = self._advantages(groups)
        b_prompts, b_comps, b_adv, b_old = [], [], [], []
        for g, a in zip(groups, advs, strict=True):
            g.require({"token_ids"}, who="PolicyTrainer.step")
            if len(a) != g.size:
                raise ValueError(f"objective returned {len(a)} advantages for a group of G={g.size}")
            p = self._prompt_ids(g)
            for i in range(g.size):
                b_prompts.append(p)
                b_comps.append([int(t) for t in g.token_ids[i]])
                b_adv.append(float(a[i]))
                b_old.append(None if g.old_logprobs is None else list(g.old_logprobs[i]))
        B = len(b_comps)
        batch = TrainBatch(groups=groups, group_advantages=advs, b_prompt_ids=b_prompts, b_completion_ids=b_comps,
                           b_advantages=torch.tensor(b_adv, dtype=torch.float32), b_old_rows=b_old,
                           micro_batches=np.array_split(np.arange(B), min(self.config.gradient_accumulation_steps, B)))
        # With one pass per batch the old policy is the current one: reuse its log-probs (as TRL).
        one_pass = self.num_iterations == 1 and (self.config.recompute_old_logprobs or None in b_old)
        batch.old_logprobs = None if one_pass else self._old_logprobs(batch)
        batch.ref_logprobs = self._ref_logprobs(batch) if self.config.beta > 0 else None
        return batch

    def _hook(self) -> Callable[..., torch.Tensor] | None:
        override = self.hints.loss_override
        if override is None:
            return None
        return lambda logp, old, adv, mask: override(logp, old, adv)

    def _micro_loss(self, batch: TrainBatch, k: int) -> tuple[torch.Tensor, dict[str, float], float]:
        """Loss of micro-batch ``k`` already scaled for accumulation, its stats and mean entropy."""
        c = self.config
        prompts, comps = batch.micro(k)
        logp, mask, ent = completion_logprobs(self.model, prompts, comps, pad_id=self.tokenizer.pad_token_id,
                                              temperature=c.temperature, with_entropy=True)
        T, dev = logp.shape[1], logp.device  # the model's device (the backend's, when they share it)
        old = logp.detach() if batch.old_logprobs is None else batch.old_logprobs[k][:, :T].to(dev)
        ref = None if batch.ref_logprobs is None else batch.ref_logprobs[k][:, :T].to(dev)
        loss, stats = surrogate_loss(
            logp, old, batch.b_advantages[batch.micro_batches[k]].to(dev), mask, epsilon=c.epsilon,
            epsilon_high=c.eps_high, loss_type=self.loss_type, beta=c.beta, ref_logp=ref,
            max_completion_length=c.max_completion_length, normalizer=batch.n_tokens,
            per_token_hook=self._hook(), kl_ratio_correction=c.use_bias_correction_kl)
        scaled = loss if self.loss_type == "dapo" else loss / len(batch.micro_batches)
        with torch.no_grad():
            entropy = float((ent * mask).sum() / mask.sum().clamp(min=1))
        return scaled, stats, entropy

    def compute_loss(self, groups: Sequence[RolloutGroup]) -> torch.Tensor:
        """The batch loss at the current parameters (sum of the scaled micro-batch losses), no update."""
        batch = self.batch(groups)
        self.model.train()
        return sum((self._micro_loss(batch, k)[0] for k in range(len(batch.micro_batches))), torch.tensor(0.0))

    # -- the update ---------------------------------------------------------------------
    def step(self, groups: Sequence[RolloutGroup]) -> dict[str, float]:
        """Update the policy on a batch of groups; returns loss, kl, entropy, clip fraction...

        Every group needs ``token_ids`` (completion ids, end-of-sequence included);
        ``old_logprobs`` are used when ``config.recompute_old_logprobs`` is False.
        """
        t0 = time.perf_counter()
        c = self.config
        if self.hints.select_groups is not None:  # e.g. Reinforce-Rej's group filter
            n_before = len(groups)
            groups = list(self.hints.select_groups(groups))
            if not groups:  # every group rejected: no update, the step is recorded as skipped
                return {"loss": 0.0, "kl": 0.0, "entropy": 0.0, "groups_kept": 0.0,
                        "groups_rejected": float(n_before), "step_time_s": time.perf_counter() - t0}
        batch = self.batch(groups)
        B, mu = batch.size, self.num_iterations
        totals: dict[str, float] = defaultdict(float)
        self.model.train()
        for _ in range(mu):
            self.optimizer.zero_grad(set_to_none=True)
            for k, idx in enumerate(batch.micro_batches):
                scaled, stats, entropy = self._micro_loss(batch, k)
                scaled.backward()
                w = len(idx) / B
                totals["loss"] += float(scaled.detach())
                for key, v in stats.items():
                    totals[key] += v * w / mu
                totals["entropy"] += entropy * w / mu
            if c.max_grad_norm is not None:
                gn = torch.nn.utils.clip_grad_norm_([p for p in self.model.parameters() if p.requires_grad],
                                                    c.max_grad_norm)
                totals["grad_norm"] += float(gn) / mu
            self.optimizer.step()
            self.global_step += 1
            if c.ref_reset_steps and self.global_step % c.ref_reset_steps == 0:
                self.reset_reference()
                totals["ref_resets"] += 1
                if batch.ref_logprobs is not None:  # the remaining epochs use the new reference
                    batch.ref_logprobs = self._ref_logprobs(batch)
        totals["loss"] /= mu
        rewards = np.concatenate([g.rewards for g in groups])
        allv = np.concatenate(batch.group_advantages)
        return {**totals, "reward_mean": float(rewards.mean()), "advantage_mean": float(allv.mean()),
                "advantage_abs_mean": float(np.abs(allv).mean()), "n_completions": float(B),
                "n_tokens": batch.n_tokens, "step": float(self.global_step), "seconds": time.perf_counter() - t0}

    @torch.no_grad()
    def _old_logprobs(self, batch: TrainBatch) -> list[torch.Tensor]:
        out = []
        for k, idx in enumerate(batch.micro_batches):
            prompts, comps = batch.micro(k)
            rows = [batch.b_old_rows[i] for i in idx]
            if not self.config.recompute_old_logprobs and all(r is not None for r in rows):
                t = torch.zeros((len(idx), max(1, max(len(x) for x in comps))))
                for r, (row, comp) in enumerate(zip(rows, comps, strict=True)):
                    vals = row[: len(comp)]  # type: ignore[index]
                    t[r, : len(vals)] = torch.tensor(vals, dtype=torch.float32)
                out.append(t)
            else:
                was = self.model.training
                self.model.eval()
                logp, _, _ = completion_logprobs(self.model, prompts, comps, pad_id=self.tokenizer.pad_token_id,
                                                 temperature=self.config.temperature)
                self.model.train(was)
                out.append(logp.detach())
        return out

    @torch.no_grad()
    def _ref_logprobs(self, batch: TrainBatch) -> list[torch.Tensor]:
        return [completion_logprobs(self.ref_model, *batch.micro(k), pad_id=self.tokenizer.pad_token_id,
                                    temperature=self.config.temperature)[0]
                for k in range(len(batch.micro_batches))]

    # -- checkpoints, resume ------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Optimizer, step, version and reference weights (for resume)."""
        return {"global_step": self.global_step, "version": self.version,
                "es_iteration": None if self.es is None else self.es.objective.iteration,
                "optimizer": self.optimizer.state_dict(),
                "ref_model": None if self.ref_model is None else self._ref_state(),
                "generator": self.generator.get_state()}

    def _ref_state(self) -> dict[str, Any]:
        """The reference policy's weights; in a LoRA run its adapter only (the base is shared and frozen)."""
        state = self.ref_model.state_dict()
        if checkpoints.is_adapter_model(self.model):
            state = {k: v for k, v in state.items() if "lora_" in k}
        return {k: v.detach().cpu() for k, v in state.items()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.global_step = int(state["global_step"])
        self.version = None if state.get("version") is None else int(state["version"])
        if self.es is not None:
            self.es.load_state_dict(state)
        self.optimizer.load_state_dict(state["optimizer"])
        if state.get("ref_model") is not None:
            if self.ref_model is None:
                self.ref_model = self._frozen_copy()
            partial = checkpoints.is_adapter_model(self.model)  # a LoRA run stores the reference's adapter only
            missing, unexpected = self.ref_model.load_state_dict(state["ref_model"], strict=not partial)
            if partial and (unexpected or any("lora_" in k for k in missing)):
                raise ConfigError(f"trainer state: the reference adapter does not fit this model (missing "
                                  f"{[k for k in missing if 'lora_' in k][:3]}, unexpected {list(unexpected)[:3]})")
        if state.get("generator") is not None:
            self.generator.set_state(state["generator"])

    def save_version(self, *, metrics: dict[str, Any] | None = None, path: str | Path | None = None,
                     extra_state: dict[str, Any] | None = None) -> int:
        """Save the current policy as the next version in the store; returns the version number.

        The first version saved by a trainer is 0 (the policy it started from), then 1, 2, ...;
        each records the previous one as its parent. Weights, tokenizer and trainer state go
        to ``path`` (default :func:`~qdevolve.rl.checkpoints.policy_dir`); the version row is
        written atomically with the run state ``trainer`` and ``extra_state``.
        """
        if self.store is None or self.run_id is None:
            raise ConfigError("save_version needs a store: PolicyTrainer(..., store=LineageStore(path))")
        parent = self.version
        self.version = 0 if parent is None else parent + 1
        if self.es is not None:
            self.es.version = self.version
        checkpoints.save_version(self.store, self.run_id, version=self.version, parent=parent, model=self.model,
                                 tokenizer=self.tokenizer, trainer_state=self.state_dict(),
                                 objective=self.objective_name, step=self.global_step, base=self._base_for_save(),
                                 metrics=metrics, path=path, extra_state=extra_state)
        return self.version

    def _base_for_save(self) -> BaseIdentity | None:
        """A LoRA run's base identity, its base saved beside the versions first when no directory holds it."""
        if not checkpoints.is_adapter_model(self.model):
            return None
        if self.base is None:
            self.base = checkpoints.ensure_base(self.store, self.run_id, self.model, self.tokenizer)  # type: ignore[arg-type]
        return self.base

    @classmethod
    def from_store(cls, store: LineageStore, run_id: str, objective: Objective | ParameterObjective,
                   config: TrainerConfig | None = None, *, version: int | None = None,
                   device: Any = None) -> PolicyTrainer:
        """Resume: load a stored version's weights and trainer state (latest by default), on ``device``."""
        loaded = checkpoints.load_version(store, run_id, version, trainable=True)
        config = config or TrainerConfig()
        # The version's kind decides: an adapter version keeps training its adapter (optimiser
        # moments line up), a full version trains all weights.
        config = config.replace(use_lora=loaded.kind == "adapter")
        trainer = cls(loaded.model, loaded.tokenizer, objective, config, store=store, run_id=run_id,
                      device=device, base=loaded.base)
        if loaded.trainer_state is not None:
            trainer.load_state_dict(loaded.trainer_state)
        trainer.version = loaded.version
        if trainer.es is not None:
            trainer.es.version = trainer.version
        return trainer

    # -- rollouts in the store ----------------------------------------------------------
    def write_rollouts(self, groups: Sequence[RolloutGroup], texts: Sequence[Sequence[str]] | None = None) -> list[Rollout]:
        """Store each group's completions as rollouts of the current policy version."""
        if self.store is None or self.run_id is None:
            raise ConfigError("write_rollouts needs a store")
        rollouts = groups_to_rollouts(groups, self.run_id, self.version, self.tokenizer, texts)
        self.store.write(rollouts=rollouts)
        return rollouts
