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
may replace the surrogate term with its ``loss_override(logp, old_logp, A)`` hook (LAD), and
its ``mu`` hint sets the update epochs unless ``num_iterations`` is configured. The reference
policy is a frozen copy of the initial policy, hard-reset to the current one every ``ref_reset_steps``
steps together with the optimiser state (ProRL, Liu et al. 2025, arXiv 2505.24864). Each call
of :meth:`PolicyTrainer.step` makes ``num_iterations`` (mu) optimiser steps over the batch,
each accumulating ``gradient_accumulation_steps`` micro-batches.

Checkpoints are policy versions in the lineage store (``policy_versions`` table; weights
saved with ``save_pretrained`` in ``<db>.policies/<run>/v<version>`` next to the database),
and rollouts go to and come back from the store's ``rollouts`` table, the one the outer
loop writes. Objectives with a parameter-space ``update`` (``es``) are driven by
:meth:`PolicyTrainer.es_step` and checkpointed the same way. Imports: the store, the group
type, torch/transformers (objectives arrive as objects built by the registry).
"""

from __future__ import annotations

import copy
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from qdevolve.db.store import LineageStore
from qdevolve.errors import ConfigError
from qdevolve.rl.config import TrainerConfig
from qdevolve.rl.group import RolloutGroup
from qdevolve.rl.sampling import completion_logprobs, encode_prompt, sample_batch, sample_group
from qdevolve.types import Rollout, new_id

__all__ = ["PolicyTrainer", "surrogate_loss", "sample_group", "sample_batch", "groups_to_rollouts",
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


def policy_dir(store: LineageStore, run_id: str, version: int) -> Path:
    """Where version ``version`` of ``run_id`` is saved: next to the database file."""
    if store.path is None:
        raise ConfigError("saving policy versions of a database given by URL needs an explicit path=")
    return store.path.parent / f"{store.path.stem}.policies" / run_id / f"v{version}"


class PolicyTrainer:
    """Clipped-surrogate trainer over rollout groups with a pluggable objective.

    Args:
        model: A ``transformers`` causal LM (trained in place; wrapped with LoRA when
            ``config.use_lora``).
        tokenizer: Its tokenizer (``pad_token_id``/``eos_token_id`` set).
        objective: An objective plugin (``advantages(group) -> [G]``; optional
            ``advantages_batch``, ``loss_type``, ``loss_override``, ``mu``).
        config: :class:`TrainerConfig`.
        store: Lineage store for rollouts and policy versions (optional).
        run_id: The run the versions and rollouts belong to (created when missing).
        ref_model: Reference policy for the KL term (default: a frozen copy of ``model``).
    """

    def __init__(self, model: Any, tokenizer: Any, objective: Any, config: TrainerConfig | None = None, *,
                 store: LineageStore | None = None, run_id: str | None = None, ref_model: Any = None) -> None:
        self.config = config or TrainerConfig()
        if not hasattr(objective, "advantages") and not hasattr(objective, "update"):
            raise ConfigError(f"objective {objective!r} has neither advantages(group) nor update(model, evaluate_fn)")
        self.objective = objective
        self.tokenizer = tokenizer
        if self.config.use_lora:
            from peft import LoraConfig, get_peft_model

            model = get_peft_model(model, LoraConfig(
                r=self.config.lora_r, lora_alpha=self.config.lora_alpha, lora_dropout=self.config.lora_dropout,
                target_modules=list(self.config.lora_target_modules), fan_in_fan_out=True, task_type="CAUSAL_LM"))
        self.model = model
        self.loss_type = self.config.loss_type
        obj_loss = getattr(objective, "loss_type", None)
        if obj_loss and self.config.loss_type == TrainerConfig().loss_type:
            self.loss_type = obj_loss
        # An objective's update-epoch hint (LAD's mu) applies unless num_iterations is set.
        self.num_iterations = self.config.num_iterations
        if self.num_iterations == TrainerConfig().num_iterations and getattr(objective, "mu", None):
            self.num_iterations = int(objective.mu)
        self.ref_model = ref_model
        if self.config.beta > 0 and self.ref_model is None:
            self.ref_model = self._frozen_copy()
        self.optimizer = self._new_optimizer()
        self.store, self.run_id = store, run_id
        if store is not None and run_id is None:
            self.run_id = store.create_run(name="train", config={"trainer": self._config_dict()})
        self.global_step = 0
        self.version: int | None = None
        self.generator = torch.Generator().manual_seed(self.config.seed)

    # -- setup --------------------------------------------------------------------------
    def _config_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return {**asdict(self.config), "objective": getattr(self.objective, "name", type(self.objective).__name__)}

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

    def reset_reference(self) -> None:
        """Hard-reset the reference policy to the current one (and the optimiser, per config)."""
        if self.ref_model is not None:
            self.ref_model.load_state_dict(self.model.state_dict())
        if self.config.reset_optimizer_on_ref_reset:
            self.optimizer = self._new_optimizer()

    # -- the update ---------------------------------------------------------------------
    @property
    def is_es(self) -> bool:
        """True for parameter-space objectives (``es``): use :meth:`es_step`, not :meth:`step`."""
        return not hasattr(self.objective, "advantages")

    def es_step(self, evaluate_fn: Any) -> dict[str, float]:
        """One ES iteration (``objective.update(model, evaluate_fn)``), counted as a step."""
        if not self.is_es:
            raise ConfigError(f"objective {getattr(self.objective, 'name', self.objective)!r} is not a "
                              "parameter-space objective; use step(groups)")
        stats = self.objective.update(self.model, evaluate_fn, iteration=self.global_step)
        self.global_step += 1
        return {**stats, "step": float(self.global_step)}

    def _prompt_ids(self, group: RolloutGroup) -> list[int]:
        ids = group.metadata.get("prompt_token_ids")
        if ids:
            return list(ids)
        if group.prompt is None:
            raise ValueError(f"group {group.prompt_id!r} has neither prompt text nor metadata['prompt_token_ids']")
        return encode_prompt(self.tokenizer, group.prompt)

    def _advantages(self, groups: Sequence[RolloutGroup]) -> list[np.ndarray]:
        if hasattr(self.objective, "advantages_batch"):
            return list(self.objective.advantages_batch(groups))
        return [np.asarray(self.objective.advantages(g), dtype=np.float64) for g in groups]

    def _prepare(self, groups: Sequence[RolloutGroup]) -> dict[str, Any]:
        """Flatten groups into rows; advantages, micro-batches, old and reference log-probs."""
        if not groups:
            raise ValueError("PolicyTrainer needs at least one group")
        if self.is_es:
            raise ConfigError("objective 'es' updates parameters directly; call es_step(evaluate_fn)")
        c = self.config
        advs = self._advantages(groups)
        prompts, comps, adv_rows, old_rows = [], [], [], []
        for g, a in zip(groups, advs, strict=True):
            g.require({"token_ids"}, who="PolicyTrainer.step")
            if len(a) != g.size:
                raise ValueError(f"objective returned {len(a)} advantages for a group of G={g.size}")
            p = self._prompt_ids(g)
            for i in range(g.size):
                prompts.append(p)
                comps.append([int(t) for t in g.token_ids[i]])
                adv_rows.append(float(a[i]))
                old_rows.append(None if g.old_logprobs is None else list(g.old_logprobs[i]))
        B = len(comps)
        micro = np.array_split(np.arange(B), min(c.gradient_accumulation_steps, B))
        hook = None
        override = getattr(self.objective, "loss_override", None)
        if override is not None:
            def hook(logp: torch.Tensor, old: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
                return override(logp, old, adv)
        return {"groups": groups, "advs": advs, "prompts": prompts, "comps": comps, "B": B, "micro": micro,
                "advantages": torch.tensor(adv_rows, dtype=torch.float32),
                "old_logp": None if self._old_is_current(old_rows) else self._old_logprobs(prompts, comps, old_rows, micro),
                "ref_logp": self._ref_logprobs(prompts, comps, micro) if c.beta > 0 else None,
                "n_tokens": float(sum(len(x) for x in comps)), "hook": hook}

    def _micro_loss(self, prep: dict[str, Any], k: int) -> tuple[torch.Tensor, dict[str, float], float]:
        """Loss of micro-batch ``k`` already scaled for accumulation, its stats and mean entropy."""
        c = self.config
        idx = prep["micro"][k]
        logp, mask, ent = completion_logprobs(
            self.model, [prep["prompts"][i] for i in idx], [prep["comps"][i] for i in idx],
            pad_id=self.tokenizer.pad_token_id, temperature=c.temperature, with_entropy=True)
        T = logp.shape[1]
        ref = prep["ref_logp"]
        old = logp.detach() if prep["old_logp"] is None else prep["old_logp"][k][:, :T]
        loss, stats = surrogate_loss(
            logp, old, prep["advantages"][idx], mask, epsilon=c.epsilon,
            epsilon_high=c.eps_high, loss_type=self.loss_type, beta=c.beta,
            ref_logp=None if ref is None else ref[k][:, :T], max_completion_length=c.max_completion_length,
            normalizer=prep["n_tokens"], per_token_hook=prep["hook"],
            kl_ratio_correction=c.use_bias_correction_kl)
        scaled = loss if self.loss_type == "dapo" else loss / len(prep["micro"])
        with torch.no_grad():
            entropy = float((ent * mask).sum() / mask.sum().clamp(min=1))
        return scaled, stats, entropy

    def compute_loss(self, groups: Sequence[RolloutGroup]) -> torch.Tensor:
        """The batch loss at the current parameters (sum of the scaled micro-batch losses), no update."""
        prep = self._prepare(groups)
        self.model.train()
        return sum((self._micro_loss(prep, k)[0] for k in range(len(prep["micro"]))), torch.tensor(0.0))

    def step(self, groups: Sequence[RolloutGroup]) -> dict[str, float]:
        """Update the policy on a batch of groups; returns loss, kl, entropy, clip fraction...

        Every group needs ``token_ids`` (completion ids, end-of-sequence included);
        ``old_logprobs`` are used when ``config.recompute_old_logprobs`` is False.
        """
        t0 = time.perf_counter()
        c = self.config
        prep = self._prepare(groups)
        B, micro = prep["B"], prep["micro"]
        totals: dict[str, float] = defaultdict(float)
        self.model.train()
        for _ in range(self.num_iterations):
            self.optimizer.zero_grad(set_to_none=True)
            for k, idx in enumerate(micro):
                scaled, stats, entropy = self._micro_loss(prep, k)
                scaled.backward()
                w = len(idx) / B
                totals["loss"] += float(scaled.detach())
                for key, v in stats.items():
                    totals[key] += v * w / self.num_iterations
                totals["entropy"] += entropy * w / self.num_iterations
            if c.max_grad_norm is not None:
                gn = torch.nn.utils.clip_grad_norm_([p for p in self.model.parameters() if p.requires_grad],
                                                    c.max_grad_norm)
                totals["grad_norm"] += float(gn) / self.num_iterations
            self.optimizer.step()
            self.global_step += 1
            if c.ref_reset_steps and self.global_step % c.ref_reset_steps == 0:
                self.reset_reference()
                totals["ref_resets"] += 1
        totals["loss"] /= self.num_iterations
        rewards = np.concatenate([g.rewards for g in groups])
        allv = np.concatenate(prep["advs"])
        return {**totals, "reward_mean": float(rewards.mean()), "advantage_mean": float(allv.mean()),
                "advantage_abs_mean": float(np.abs(allv).mean()), "n_completions": float(B),
                "n_tokens": prep["n_tokens"], "step": float(self.global_step), "seconds": time.perf_counter() - t0}

    def _old_is_current(self, old_rows: list) -> bool:
        """With one pass per batch the old policy is the current one: reuse its log-probs (as TRL)."""
        if self.num_iterations != 1:
            return False
        return self.config.recompute_old_logprobs or any(r is None for r in old_rows)

    @torch.no_grad()
    def _old_logprobs(self, prompts: list, comps: list, old_rows: list, micro: list) -> list[torch.Tensor]:
        out = []
        for idx in micro:
            T = max(1, max(len(comps[i]) for i in idx))
            if not self.config.recompute_old_logprobs and all(old_rows[i] is not None for i in idx):
                t = torch.zeros((len(idx), T))
                for r, i in enumerate(idx):
                    row = old_rows[i][: len(comps[i])]
                    t[r, : len(row)] = torch.tensor(row, dtype=torch.float32)
                out.append(t)
            else:
                was = self.model.training
                self.model.eval()
                logp, _, _ = completion_logprobs(self.model, [prompts[i] for i in idx], [comps[i] for i in idx],
                                                 pad_id=self.tokenizer.pad_token_id,
                                                 temperature=self.config.temperature)
                self.model.train(was)
                out.append(logp.detach())
        return out

    @torch.no_grad()
    def _ref_logprobs(self, prompts: list, comps: list, micro: list) -> list[torch.Tensor]:
        return [completion_logprobs(self.ref_model, [prompts[i] for i in idx], [comps[i] for i in idx],
                                    pad_id=self.tokenizer.pad_token_id, temperature=self.config.temperature)[0]
                for idx in micro]

    # -- checkpoints, resume ------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Optimizer, step, version and reference weights (for resume)."""
        return {"global_step": self.global_step, "version": self.version,
                "es_iteration": getattr(self.objective, "iteration", None), "optimizer": self.optimizer.state_dict(),
                "ref_model": None if self.ref_model is None else self.ref_model.state_dict(),
                "generator": self.generator.get_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.global_step = int(state["global_step"])
        self.version = None if state.get("version") is None else int(state["version"])
        if state.get("es_iteration") is not None and hasattr(self.objective, "iteration"):
            self.objective.iteration = int(state["es_iteration"])
        self.optimizer.load_state_dict(state["optimizer"])
        if state.get("ref_model") is not None:
            if self.ref_model is None:
                self.ref_model = self._frozen_copy()
            self.ref_model.load_state_dict(state["ref_model"])
        if state.get("generator") is not None:
            self.generator.set_state(state["generator"])

    def save_version(self, *, metrics: dict[str, Any] | None = None, path: str | Path | None = None) -> int:
        """Save the current policy as the next version in the store; returns the version number.

        The first version saved by a trainer is 0 (the policy it started from), then 1, 2, ...;
        each records the previous one as its parent.

        The model and tokenizer go to ``path`` (default :func:`policy_dir`) with
        ``save_pretrained`` (LoRA adapters merged into a plain model), the trainer state to
        ``trainer_state.pt`` beside them, and a ``policy_versions`` row records the path,
        step, objective and metrics, atomically with the run state ``trainer`` (JSON).
        """
        if self.store is None or self.run_id is None:
            raise ConfigError("save_version needs a store: PolicyTrainer(..., store=LineageStore(path))")
        parent = self.version
        version = 0 if parent is None else parent + 1
        target = Path(path) if path is not None else policy_dir(self.store, self.run_id, version)
        target.mkdir(parents=True, exist_ok=True)
        model = self.model
        if self.config.use_lora:
            model = copy.deepcopy(self.model).merge_and_unload()
        model.save_pretrained(target)
        self.tokenizer.save_pretrained(target)
        self.version = version
        torch.save(self.state_dict(), target / "trainer_state.pt")
        obj_name = getattr(self.objective, "name", type(self.objective).__name__)
        self.store.add_policy_version(
            self.run_id, version, objective=obj_name, parent_version=parent, step=self.global_step,
            path=str(target), metrics=metrics or {},
            state={"trainer": {"version": version, "global_step": self.global_step, "path": str(target),
                               "objective": obj_name}})
        return version

    @classmethod
    def from_store(cls, store: LineageStore, run_id: str, objective: Any, config: TrainerConfig | None = None,
                   *, version: int | None = None) -> PolicyTrainer:
        """Resume: load a stored version's weights and trainer state (latest by default)."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        rows = store.policy_versions(run_id)
        if not rows:
            raise ConfigError(f"run {run_id} has no policy versions in {store.target}")
        row = rows[-1] if version is None else next((r for r in rows if r["version"] == version), None)
        if row is None:
            raise ConfigError(f"run {run_id} has no policy version {version}; it has "
                              f"{', '.join(str(r['version']) for r in rows)}")
        model = AutoModelForCausalLM.from_pretrained(row["path"], dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(row["path"])
        config = config or TrainerConfig()
        if config.use_lora:
            config = config.replace(use_lora=False)  # the saved model is merged; new adapters start fresh
        trainer = cls(model, tokenizer, objective, config, store=store, run_id=run_id)
        state_file = Path(row["path"]) / "trainer_state.pt"
        if state_file.is_file():
            trainer.load_state_dict(torch.load(state_file, weights_only=False))
        trainer.version = int(row["version"])
        return trainer

    # -- rollouts in the store ----------------------------------------------------------
    def write_rollouts(self, groups: Sequence[RolloutGroup], texts: Sequence[Sequence[str]] | None = None) -> list[Rollout]:
        """Store each group's completions as rollouts of the current policy version."""
        if self.store is None or self.run_id is None:
            raise ConfigError("write_rollouts needs a store")
        rollouts = groups_to_rollouts(groups, self.run_id, self.version, self.tokenizer, texts)
        self.store.write(rollouts=rollouts)
        return rollouts


def groups_to_rollouts(groups: Sequence[RolloutGroup], run_id: str, policy_version: int | None, tokenizer: Any,
                       texts: Sequence[Sequence[str]] | None = None) -> list[Rollout]:
    """:class:`~qdevolve.types.Rollout` rows of the groups (one ``group_id`` per group).

    Outcome keys and candidate vectors go to ``metadata["outcome_key"]`` /
    ``metadata["candidate_vectors"]`` (where ``RolloutGroup.from_rollouts`` reads them), the
    prompt ids to ``prompt_token_ids``, the cluster keys to ``cluster_key``.
    """
    out = []
    for gi, g in enumerate(groups):
        gid = g.prompt_id or new_id()
        if g.prompt_id is None:
            g.prompt_id = gid
        p_ids = list(g.metadata.get("prompt_token_ids") or (encode_prompt(tokenizer, g.prompt) if g.prompt else []))
        for i in range(g.size):
            ids = [int(t) for t in g.token_ids[i]] if g.token_ids is not None else []
            text = texts[gi][i] if texts is not None else tokenizer.decode(ids, skip_special_tokens=True)
            meta: dict[str, Any] = {}
            if g.outcome_keys is not None:
                meta["outcome_key"] = g.outcome_keys[i]
            if g.candidate_vectors is not None:
                meta["candidate_vectors"] = g.candidate_vectors[i].tolist()
            out.append(Rollout(
                prompt=g.prompt or "", completion=text, run_id=run_id, token_ids=ids,
                logprobs=[] if g.old_logprobs is None else [float(x) for x in g.old_logprobs[i]],
                policy_version=policy_version, reward=float(g.rewards[i]),
                reward_vector=None if g.reward_vectors is None else g.reward_vectors[i].tolist(),
                cluster_key=None if g.cluster_keys is None else str(g.cluster_keys[i]), group_id=gid,
                prompt_token_ids=p_ids, prompt_tokens=len(p_ids), completion_tokens=len(ids), metadata=meta))
    return out


def groups_from_store(store: LineageStore, run_id: str, *, policy_version: int | None = None,
                      after_seq: int = 0) -> tuple[list[RolloutGroup], int]:
    """Rebuild groups (by ``group_id``) from evaluated rollouts; returns them and the last seq."""
    rows = store.rollouts(run_id, policy_version=policy_version, after_seq=after_seq, evaluated_only=True)
    by_group: dict[str, list[Rollout]] = {}
    last = after_seq
    for seq, r in rows:
        by_group.setdefault(r.group_id or r.id, []).append(r)
        last = max(last, seq)
    groups = []
    for rs in by_group.values():
        g = RolloutGroup.from_rollouts(rs)
        g.metadata["prompt_token_ids"] = list(rs[0].prompt_token_ids)
        groups.append(g)
    return groups, last
