"""ESTrainer: drives a parameter-space objective (``es``) and checkpoints it like the policy trainer.

One :meth:`ESTrainer.step` is one ES iteration, ``objective.update(model, evaluate_fn)``
(Salimans et al. 2017, arXiv 1703.03864; Qiu et al. 2025, arXiv 2509.24372)::

    theta <- theta + alpha (1/N) sum_n Z_n eps_n

Precision: an update of a low-precision model (bf16/fp16) is computed on fp32 weights and
rounded to the model's dtype **once** per iteration. Adding each ``alpha Z_n eps_n / N``
to bf16 weights separately rounds every term, and terms below half a bf16 step (2^-8 of
the weight's magnitude) vanish, so most of the update is lost. For the duration of a step
the trainable weights are held in fp32 (the perturbed evaluations see fp32 weights too),
then cast back.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from qdevolve.db.store import LineageStore
from qdevolve.errors import ConfigError
from qdevolve.rl import checkpoints
from qdevolve.rl.protocols import ParameterObjective

__all__ = ["ESTrainer", "GroupES"]


class ESTrainer:
    """Evolution strategies on a model, with policy versions in the store.

    Args:
        model: Any ``torch.nn.Module`` (its trainable parameters are updated in place).
        tokenizer: Saved with each version (may be ``None`` when versions are not saved).
        objective: A :class:`~qdevolve.rl.protocols.ParameterObjective` (``es``).
        store / run_id: Where versions go (optional).
    """

    def __init__(self, model: Any, tokenizer: Any, objective: ParameterObjective, *,
                 store: LineageStore | None = None, run_id: str | None = None) -> None:
        if not isinstance(objective, ParameterObjective):
            raise ConfigError(f"objective {objective!r} has no update(model, evaluate_fn); ESTrainer drives "
                              "parameter-space objectives such as 'es'")
        self.model, self.tokenizer, self.objective = model, tokenizer, objective
        self.store, self.run_id = store, run_id
        self.global_step = 0
        self.version: int | None = None

    def step(self, evaluate_fn: Callable[[Any], float]) -> dict[str, float]:
        """One ES iteration (module docstring); returns the objective's reward statistics."""
        params = [p for p in self.model.parameters() if p.requires_grad]
        low = [(p, p.dtype) for p in params if p.dtype != torch.float32]
        with torch.no_grad():
            for p, _ in low:
                p.data = p.data.float()
        try:
            stats = self.objective.update(self.model, evaluate_fn, iteration=self.global_step)
        finally:
            with torch.no_grad():
                for p, dtype in low:
                    p.data = p.data.to(dtype)  # the one rounding of this iteration
        self.global_step += 1
        return {**{k: float(v) for k, v in stats.items()}, "step": float(self.global_step)}

    def state_dict(self) -> dict[str, Any]:
        return {"global_step": self.global_step, "version": self.version, "es_iteration": self.objective.iteration}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.global_step = int(state["global_step"])
        self.version = None if state.get("version") is None else int(state["version"])
        if state.get("es_iteration") is not None:
            self.objective.iteration = int(state["es_iteration"])

    def save_version(self, *, metrics: dict[str, Any] | None = None, path: str | Path | None = None) -> int:
        """Save the current model as the next policy version (see :mod:`qdevolve.rl.checkpoints`)."""
        if self.store is None or self.run_id is None:
            raise ConfigError("save_version needs a store: ESTrainer(..., store=LineageStore(path), run_id=...)")
        parent = self.version
        version = 0 if parent is None else parent + 1
        self.version = version
        checkpoints.save_version(self.store, self.run_id, version=version, parent=parent, model=self.model,
                                 tokenizer=self.tokenizer, trainer_state=self.state_dict(), objective="es",
                                 step=self.global_step, merge_lora=False, metrics=metrics, path=path)
        return version


class GroupES:
    """ES inside the joined loop: each population member is a perturbed policy that writes the
    children of one RL group; the group's mean reward is that member's fitness.

    Salimans et al. 2017 (arXiv 1703.03864) with the z-scored update of Qiu et al. 2025
    (arXiv 2509.24372), members evaluated on the run's own parents instead of a fixed batch::

        member n of iteration t:  theta_n = theta + sigma eps_n     (eps_n from seed_n)
        R_n = mean reward of the group theta_n generated             (its fitness)
        theta <- theta + alpha (1/N) sum_n z(R)_n eps_n              (after N groups)

    The caller (the joined listener) asks :meth:`assign` for a member before a generation,
    wraps the generation in :meth:`perturbed`, records each child's reward with
    :meth:`record`, marks the member's group done with :meth:`finish`, and calls
    :meth:`update` once :attr:`ready`. A member whose group earned nothing scores the
    ``missing`` reward. Parameters are fp32 (the tiny policy); others are perturbed through
    the objective's fp32 copy and restored exactly.
    """

    def __init__(self, objective: Any, model: Any, *, missing: float = 0.0) -> None:
        self.objective, self.model, self.missing = objective, model, float(missing)
        self.iteration = int(objective.iteration)
        self.seeds = objective.seeds(self.iteration)
        self.assigned = 0
        self.finished = 0
        self.fitness: dict[int, list[float]] = {}

    @property
    def population(self) -> int:
        return int(self.objective.population)

    @property
    def full(self) -> bool:
        """Every member of this iteration has its group; new groups wait for :meth:`update`."""
        return self.assigned >= self.population

    @property
    def ready(self) -> bool:
        return self.finished >= self.population

    def assign(self) -> int:
        """The next member of this iteration (its index)."""
        member = self.assigned % self.population
        self.assigned += 1
        return member

    def perturbed(self, member: int) -> _Perturbed:
        """``with group_es.perturbed(m): generate(...)``: theta + sigma eps_m, restored after."""
        return _Perturbed(self, member)

    def record(self, member: int, reward: float | None) -> None:
        self.fitness.setdefault(member, []).append(self.missing if reward is None else float(reward))

    def finish(self) -> None:
        self.finished += 1

    @torch.no_grad()
    def update(self) -> dict[str, float]:
        """theta += alpha/N sum z_n eps_n over this iteration's members; the next iteration."""
        obj = self.objective
        params = [p for p in self.model.parameters() if p.requires_grad]
        rewards = np.array([float(np.mean(self.fitness[m])) if self.fitness.get(m) else self.missing
                            for m in range(self.population)])
        std = float(rewards.std())
        updated = std > 0 and obj.alpha > 0
        if updated:
            z = (rewards - rewards.mean()) / std
            for s, zn in zip(self.seeds, z, strict=True):
                for i, p in enumerate(params):
                    step = obj.noise(s, i, p) * float(obj.alpha * zn / self.population)
                    p.copy_((p.float() + step).to(p.dtype))
        stats = {"reward_mean": float(rewards.mean()), "reward_std": std, "reward_max": float(rewards.max()),
                 "updated": float(updated), "es_iteration": float(self.iteration)}
        self.iteration += 1
        obj.iteration = self.iteration
        self.seeds = obj.seeds(self.iteration)
        self.assigned = self.finished = 0
        self.fitness = {}
        return stats


class _Perturbed:
    def __init__(self, es: GroupES, member: int) -> None:
        self.es, self.member = es, member
        self.params = [p for p in es.model.parameters() if p.requires_grad]
        self.backup: dict[int, torch.Tensor] = {}

    def __enter__(self) -> int:
        seed = self.es.seeds[self.member]
        self.es.objective._add(self.params, seed, self.es.objective.sigma, self.backup)
        return self.member

    def __exit__(self, *exc: object) -> None:
        self.es.objective._restore(self.params, self.es.seeds[self.member], self.backup)
