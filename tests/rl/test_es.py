"""ES: seed-regenerated noise, exact restore, z-scored update direction, determinism."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from qdevolve import registry
from qdevolve.rl.objectives.es import ES


class Quadratic(torch.nn.Module):
    def __init__(self, dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.a = torch.nn.Parameter(torch.zeros(5, dtype=dtype))
        self.b = torch.nn.Parameter(torch.zeros(5, dtype=dtype))  # same shape: noise must differ

    def reward(self) -> float:
        target = torch.arange(10, dtype=torch.float32) / 10
        theta = torch.cat([self.a.detach().float(), self.b.detach().float()])
        return -float(((theta - target) ** 2).sum())


def test_registered_and_validated() -> None:
    es = registry.objective.create({"type": "es", "population": 4, "sigma": 0.1, "alpha": 0.01})
    assert isinstance(es, ES) and not hasattr(es, "advantages")
    with pytest.raises(ValueError):
        ES(population=1)
    with pytest.raises(ValueError):
        ES(sigma=0.0)


def test_noise_is_regenerated_and_independent_per_tensor() -> None:
    like = torch.zeros(5)
    assert torch.equal(ES.noise(7, 0, like), ES.noise(7, 0, like))
    assert not torch.equal(ES.noise(7, 0, like), ES.noise(7, 1, like))
    assert ES(seed=1).seeds(3) == ES(seed=1).seeds(3) != ES(seed=1).seeds(4)


def test_update_follows_the_zscored_formula() -> None:
    model = Quadratic()
    es = ES(population=6, sigma=0.1, alpha=0.05, seed=0)
    seeds = es.seeds(0)
    rewards = []
    for s in seeds:  # the rewards ES will see, computed independently
        eps = torch.cat([ES.noise(s, 0, model.a), ES.noise(s, 1, model.b)])
        theta = 0.1 * eps
        target = torch.arange(10, dtype=torch.float32) / 10
        rewards.append(-float(((theta - target) ** 2).sum()))
    r = np.array(rewards)
    z = (r - r.mean()) / r.std()
    expected = sum(float(zn) * torch.cat([ES.noise(s, 0, model.a), ES.noise(s, 1, model.b)])
                   for s, zn in zip(seeds, z, strict=True)) * 0.05 / 6
    stats = es.update(model, lambda m: m.reward())
    got = torch.cat([model.a.detach(), model.b.detach()])
    assert torch.allclose(got, expected, atol=1e-6)
    assert stats["reward_mean"] == pytest.approx(r.mean(), rel=1e-5) and stats["restore_error"] < 1e-6


def test_es_improves_reward_and_is_deterministic() -> None:
    runs = []
    for _ in range(2):
        model = Quadratic()
        es = ES(population=20, sigma=0.05, alpha=0.05, seed=3)
        start = model.reward()
        for _ in range(30):
            es.update(model, lambda m: m.reward())
        runs.append(torch.cat([model.a.detach(), model.b.detach()]))
        assert model.reward() > start + 1.0
    assert torch.equal(runs[0], runs[1])


def test_restore_without_update_and_low_precision_exactness() -> None:
    for dtype in (torch.float32, torch.bfloat16):
        model = Quadratic(dtype)
        with torch.no_grad():
            model.a.copy_(torch.linspace(-1, 1, 5).to(dtype))
        before = [p.detach().clone() for p in model.parameters()]
        seen: list[torch.Tensor] = []
        ES(population=4, sigma=0.01, alpha=0.0).update(model, lambda m, seen=seen: seen.append(m.a.detach().clone()) or 0.0)
        assert all(not torch.equal(s, before[0]) for s in seen)  # the model was perturbed
        for b, p in zip(before, model.parameters(), strict=True):
            if dtype == torch.bfloat16:
                assert torch.equal(b, p)  # restored exactly from the fp32 copy
            else:
                assert torch.allclose(b, p, atol=1e-7)


def test_constant_rewards_skip_the_update() -> None:
    model = Quadratic()
    stats = ES(population=4, sigma=0.1, alpha=1.0).update(model, lambda m: 1.0)
    assert stats["updated"] == 0.0 and float(model.a.abs().max()) < 1e-6


class Flat(torch.nn.Module):
    def __init__(self, dtype: torch.dtype) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.full((256,), 1.5, dtype=dtype))


def test_es_trainer_adds_bf16_updates_in_fp32_and_rounds_once() -> None:
    """Hand-computed: rewards 0..N-1 give z_n = (n - mean) / std; the update
    w + sum_n (alpha z_n / N) eps_n is added term by term in fp32 and rounded to bf16 once.
    Each term alone is below half a bf16 step at 1.5 (2^-8), so adding them one at a time in
    bf16 (the objective's own low-precision path) loses nearly all of the update."""
    from qdevolve.rl.es import ESTrainer

    alpha, N = 0.2, 64
    es = ES(population=N, sigma=1e-3, alpha=alpha, seed=5)
    r = np.arange(N, dtype=float)
    z = (r - r.mean()) / r.std()
    exact = torch.full((256,), 1.5, dtype=torch.float32)
    for s, zn in zip(es.seeds(0), z, strict=True):
        exact = exact + ES.noise(s, 0, exact) * float(alpha * zn / N)

    def scripted() -> object:
        rewards = iter(r.tolist())
        return lambda model: next(rewards)

    model = Flat(torch.bfloat16)
    stats = ESTrainer(model, None, es).step(scripted())
    assert stats["updated"] == 1.0 and stats["step"] == 1.0
    assert model.w.dtype == torch.bfloat16
    err_once = (model.w.detach().float() - exact).abs()
    assert float(err_once.max()) <= 2.0**-8 + 1e-5  # one rounding: at most half a bf16 step
    assert torch.equal(model.w.detach(), exact.to(torch.bfloat16)) or float(err_once.mean()) < 1e-3
    naive = Flat(torch.bfloat16)
    ES(population=N, sigma=1e-3, alpha=alpha, seed=5).update(naive, scripted(), iteration=0)
    err_each = (naive.w.detach().float() - exact).abs()
    assert float(err_each.mean()) > 4 * float(err_once.mean())  # rounding every term loses the update


def test_es_trainer_state_and_policy_trainer_delegation(tmp_path) -> None:
    from qdevolve.rl.es import ESTrainer
    from qdevolve.rl.trainer import PolicyTrainer

    model = Quadratic()
    trainer = ESTrainer(model, None, ES(population=4, sigma=0.1, alpha=0.05, seed=1))
    for _ in range(3):
        trainer.step(lambda m: m.reward())
    assert trainer.global_step == 3 and trainer.objective.iteration == 3
    again = ESTrainer(Quadratic(), None, ES(population=4, sigma=0.1, alpha=0.05, seed=1))
    again.load_state_dict(trainer.state_dict())
    assert again.objective.iteration == 3 and again.global_step == 3
    pt = PolicyTrainer(Quadratic(), None, ES(population=2))
    assert pt.is_es and pt.es_step(lambda m: 0.0)["step"] == 1.0 and pt.global_step == 1
    with pytest.raises(Exception, match="update"):
        ESTrainer(Quadratic(), None, registry.objective.create({"type": "grpo"}))
