"""LAD: learning the advantage distribution with an f-divergence loss (``lad``).

Kind ``objective``. Source: Li & Li 2026, "Learning Advantage Distribution for Reasoning",
arXiv 2602.20132. Loss **reconstructed** from a paper note and a port that follows the
authors' code (diversity-rl.md §5)::

    target (trust-region optimum):  pi*(y|x) / pi_old(y|x)  proportional to  exp(A/eta)
    L_LAD = E_{y ~ pi_old} [ exp(A/eta) · f( rho · exp(-A/eta) ) ],   rho = pi_theta / pi_old
    f_JS(x)        = 1/2 [ x log x - (x + 1) log((x + 1) / 2) ]          (f="js", default)
    f_Hellinger(x) = (sqrt(x) - 1)^2                                     (f="hellinger")

Symbols: ``A`` the completion's advantage (GRPO's group z-score, :meth:`LAD.advantages`);
``eta`` the temperature (the paper's main setting 1/eta = 4, i.e. eta = 0.25); ``rho`` the
importance ratio, applied per token here (token- vs sequence-level in the authors' code is
not verified). Since f'(1) = 0 each sample's push stops once rho = exp(A/eta). At rho = 1
(the first inner epoch) the gradient equals a policy gradient with the reshaped advantage
``g(A) = -f'(exp(-A/eta))`` (for JS: ``1/2 log((1 + exp(A/eta)) / 2)``), so the
over-confidence brake needs several update epochs ``mu`` on the same rollouts.

Trainer hooks (torch is imported only inside them):

* ``loss_override(logprobs, old_logprobs, advantages) -> Tensor [B, L]`` - the per-token
  loss replacing the clipped surrogate. ``logprobs``/``old_logprobs`` are ``[B, L]`` tensors
  of the sampled tokens' log-probs under the current and the sampling policy; ``advantages``
  is ``[B]`` (broadcast over tokens) or ``[B, L]``. The trainer masks and aggregates it like
  the surrogate (per sequence, per token, fixed length) and adds its KL term.
* ``loss(logprobs, old_logprobs, advantages, mask) -> Tensor []`` - the same, masked and
  averaged over the active tokens of the batch.
* ``mu`` - the number of update epochs per batch the method expects (a hint).

Settings: ``eta`` (> 0), ``mu`` (int >= 1), ``f`` in {"js", "hellinger"}, ``scale``, ``eps``,
``batch_std`` (as in ``grpo``, for the advantages).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from qdevolve import registry
from qdevolve.rl._common import STD_EPS, ScaledObjective, check_positive
from qdevolve.rl.group import RolloutGroup

__all__ = ["LAD"]

_FS = ("js", "hellinger")


@registry.objective("lad")
class LAD(ScaledObjective):
    """GRPO advantages plus the LAD f-divergence loss override (see module docstring)."""

    name = "lad"
    requires = frozenset()

    def __init__(
        self,
        *,
        eta: float = 0.25,
        mu: int = 4,
        f: str = "js",
        scale: str = "group",
        eps: float = STD_EPS,
        batch_std: float | None = None,
    ) -> None:
        super().__init__(scale=scale, eps=eps, batch_std=batch_std)
        self.eta = check_positive("eta", eta)
        if isinstance(mu, bool) or int(mu) != mu or int(mu) < 1:
            raise ValueError(f"mu (update epochs per batch) must be an integer >= 1, got {mu!r}")
        self.mu = int(mu)
        if f not in _FS:
            raise ValueError(f"f must be one of {', '.join(_FS)}, got {f!r}")
        self.f = f

    def scores(self, group: RolloutGroup) -> np.ndarray:
        return group.rewards

    def _f(self, x: Any) -> Any:
        import torch

        if self.f == "js":
            return 0.5 * (torch.xlogy(x, x) - torch.xlogy(x + 1.0, (x + 1.0) / 2.0))
        return (torch.sqrt(x) - 1.0) ** 2

    def loss_override(self, logprobs: Any, old_logprobs: Any, advantages: Any) -> Any:
        """Per-token LAD loss ``exp(A/eta) f(rho exp(-A/eta))``, shape ``[B, L]``."""
        import torch

        logprobs = torch.as_tensor(logprobs)
        old = torch.as_tensor(old_logprobs, dtype=logprobs.dtype, device=logprobs.device).detach()
        adv = torch.as_tensor(advantages, dtype=logprobs.dtype, device=logprobs.device).detach()
        if adv.dim() == 1:
            adv = adv.unsqueeze(-1)
        scaled = adv / self.eta
        x = torch.exp(logprobs - old - scaled)
        return torch.exp(scaled) * self._f(x)

    def loss(self, logprobs: Any, old_logprobs: Any, advantages: Any, mask: Any) -> Any:
        """Masked mean of :meth:`loss_override` over the batch's active tokens (scalar)."""
        import torch

        per_token = self.loss_override(logprobs, old_logprobs, advantages)
        m = torch.as_tensor(mask, dtype=per_token.dtype, device=per_token.device)
        return (per_token * m).sum() / m.sum().clamp(min=1.0)
