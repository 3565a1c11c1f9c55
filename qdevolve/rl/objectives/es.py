"""ES: evolution strategies in parameter space (kind ``objective``, name ``es``).

Sources: Salimans, Ho, Chen, Sidor & Sutskever 2017, "Evolution Strategies as a Scalable
Alternative to Reinforcement Learning", arXiv 1703.03864 (seed-only noise communication);
Qiu et al. 2025/2026, "Evolution Strategies at Scale: LLM Fine-Tuning Beyond Reinforcement
Learning", arXiv 2509.24372 (Algorithm 1-2: z-scored rewards, in-place layer-wise perturb /
restore, greedy decoding, learning-rate digestion, no mirrored sampling); Hayes et al. 2026,
"Beyond the Best Guess: Improving LLM Solution Coverage with Evolution Strategies",
arXiv 2608.12679 (ES keeps pass@k coverage that GRPO loses). One iteration::

    for n = 1..N:   eps_n = randn(seed_n)                   (regenerated from an integer seed)
                    R_n   = R(theta + sigma eps_n)           (theta perturbed in place, then restored)
    Z_n   = (R_n - mean R) / std R                           (z-score within the iteration)
    theta = theta + alpha (1/N) sum_n Z_n eps_n              (1/sigma absorbed into alpha)

Symbols: ``N`` the population, ``sigma`` the noise scale, ``alpha`` the step size, ``R`` the
caller's ``evaluate_fn(model) -> float`` (e.g. the mean reward of greedy completions on a
batch of prompts). Noise is never stored: ``eps_n`` is regenerated from ``seed_n`` (one
independent stream per parameter tensor, avoiding the pitfall of noise correlated
across tensors) for the perturbation, the restoration and the update.
Arithmetic is fp32: fp32 parameters are perturbed and restored in place (the restore error,
reported as ``restore_error``, is float rounding only); lower-precision parameters are
perturbed from an fp32 copy and restored exactly from it. If every ``R_n`` is equal the
update is skipped (no signal). This is a parameter-space update, not an advantage.

Settings: ``population`` (N, default 30), ``sigma`` (1e-3), ``alpha`` (5e-4), ``seed``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from qdevolve import registry

__all__ = ["ES"]

_MIX = 1_000_003


@registry.objective("es")
class ES:
    """OpenAI-style evolution strategies with seed-regenerated noise (module docstring)."""

    name = "es"

    def __init__(self, *, population: int = 30, sigma: float = 1e-3, alpha: float = 5e-4, seed: int = 0) -> None:
        if int(population) != population or population < 2:
            raise ValueError(f"population must be an integer >= 2, got {population!r}")
        if not (sigma > 0 and np.isfinite(sigma)):
            raise ValueError(f"sigma must be finite and > 0, got {sigma!r}")
        if not (alpha >= 0 and np.isfinite(alpha)):
            raise ValueError(f"alpha must be finite and >= 0, got {alpha!r}")
        self.population, self.sigma, self.alpha, self.seed = int(population), float(sigma), float(alpha), int(seed)
        self.iteration = 0

    def seeds(self, iteration: int) -> list[int]:
        """The population's integer seeds at ``iteration`` (deterministic in ``seed``)."""
        rng = np.random.default_rng([self.seed, iteration])
        return [int(s) for s in rng.integers(0, 2**31 - 1, size=self.population)]

    @staticmethod
    def _params(model: torch.nn.Module) -> list[torch.Tensor]:
        return [p for p in model.parameters() if p.requires_grad]

    @staticmethod
    def noise(seed: int, index: int, like: torch.Tensor) -> torch.Tensor:
        """``eps`` for parameter ``index`` under ``seed`` (fp32, on ``like``'s device)."""
        g = torch.Generator().manual_seed((seed * _MIX + index) % (2**63 - 1))
        return torch.randn(like.shape, generator=g, dtype=torch.float32).to(like.device)

    @torch.no_grad()
    def _add(self, params: list[torch.Tensor], seed: int, scale: float, backup: dict[int, torch.Tensor]) -> None:
        for i, p in enumerate(params):
            eps = self.noise(seed, i, p)
            if p.dtype == torch.float32:
                p.add_(eps, alpha=scale)
            else:
                base = backup.setdefault(i, p.detach().float().clone())
                p.copy_((base + scale * eps).to(p.dtype))

    @torch.no_grad()
    def _restore(self, params: list[torch.Tensor], seed: int, backup: dict[int, torch.Tensor]) -> None:
        for i, p in enumerate(params):
            if p.dtype == torch.float32:
                p.sub_(self.noise(seed, i, p), alpha=self.sigma)
            else:
                p.copy_(backup[i].to(p.dtype))

    @torch.no_grad()
    def update(self, model: torch.nn.Module, evaluate_fn: Callable[[torch.nn.Module], float], *,
               iteration: int | None = None) -> dict[str, Any]:
        """One ES iteration on ``model`` in place; returns reward statistics.

        Args:
            model: The policy (any ``torch.nn.Module``; trainable parameters are perturbed).
            evaluate_fn: ``R(model)``: a scalar reward of the (perturbed) model.
            iteration: Iteration index for the seeds (default: an internal counter).
        """
        t0 = time.perf_counter()
        it = self.iteration if iteration is None else int(iteration)
        params = self._params(model)
        if not params:
            raise ValueError("ES.update: the model has no trainable parameters")
        check = [p.detach().float().clone() for p in params[:1]]
        seeds = self.seeds(it)
        rewards = np.zeros(self.population)
        for n, s in enumerate(seeds):
            backup: dict[int, torch.Tensor] = {}
            self._add(params, s, self.sigma, backup)
            try:
                rewards[n] = float(evaluate_fn(model))
            finally:
                self._restore(params, s, backup)
        restore_error = float((params[0].detach().float() - check[0]).abs().max())
        std = float(rewards.std())
        updated = std > 0 and self.alpha > 0
        if updated:
            z = (rewards - rewards.mean()) / std
            for s, zn in zip(seeds, z, strict=True):
                for i, p in enumerate(params):
                    step = self.noise(s, i, p) * float(self.alpha * zn / self.population)
                    if p.dtype == torch.float32:
                        p.add_(step)
                    else:
                        p.copy_((p.float() + step).to(p.dtype))
        self.iteration = it + 1
        return {"reward_mean": float(rewards.mean()), "reward_std": std, "reward_max": float(rewards.max()),
                "updated": float(updated), "restore_error": restore_error, "iteration": float(it),
                "seconds": time.perf_counter() - t0}
