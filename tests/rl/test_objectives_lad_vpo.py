"""LAD (f-divergence loss) and VPO (Dirichlet set rewards) on hand-computed groups.

Every expected value is derived in the test from the objective's formula (docs/objectives.md)
with explicit arithmetic, never by calling the implementation.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from qdevolve.rl import RolloutGroup
from tests.rl._objectives import EPS, TOL, make

# -- lad --------------------------------------------------------------------------------


def test_lad_advantages_are_grpo():
    g = RolloutGroup([1.0, 0.0, 0.5, 1.0])
    np.testing.assert_allclose(make("lad").advantages(g), make("grpo").advantages(g), atol=TOL)


@pytest.mark.parametrize("f", ["js", "hellinger"])
def test_lad_gradient_at_ratio_one_by_hand(f):
    torch = pytest.importorskip("torch")
    eta = 0.25
    obj = make("lad", eta=eta, f=f)
    adv = torch.tensor([2.0, -1.0, 0.0], dtype=torch.float64)
    lp = torch.tensor(
        [[-1.0, -2.0], [-0.5, -0.7], [-3.0, -0.1]], dtype=torch.float64, requires_grad=True
    )
    loss = obj.loss_override(lp, lp.detach(), adv)
    assert loss.shape == (3, 2)
    loss.sum().backward()
    # d/dlogp [e^{A/eta} f(rho e^{-A/eta})] at rho = 1 is f'(x) with x = e^{-A/eta}
    expected = []
    for a in (2.0, -1.0, 0.0):
        x = math.exp(-a / eta)
        if f == "js":
            fprime = 0.5 * math.log(2 * x / (x + 1))  # = -1/2 log((1 + e^{A/eta}) / 2)
        else:
            fprime = 1 - 1 / math.sqrt(x)
        expected.append([fprime, fprime])
    np.testing.assert_allclose(lp.grad.numpy(), expected, atol=TOL)
    # minimising pushes positive advantages up (negative gradient), negative ones down
    assert lp.grad[0, 0] < 0 < lp.grad[1, 0]


def test_lad_brake_at_target_ratio():
    torch = pytest.importorskip("torch")
    eta, a = 0.25, 0.5
    obj = make("lad", eta=eta)
    old = torch.tensor([[-2.0]], dtype=torch.float64)
    # at rho = e^{A/eta} the loss is e^{A/eta} f(1) = 0 and its gradient vanishes
    lp = (old + a / eta).clone().requires_grad_(True)
    loss = obj.loss_override(lp, old, torch.tensor([a], dtype=torch.float64))
    loss.sum().backward()
    assert abs(loss.item()) < TOL and abs(lp.grad.item()) < TOL


def test_lad_masked_loss_by_hand():
    torch = pytest.importorskip("torch")
    eta = 0.5
    obj = make("lad", eta=eta)
    lp = torch.tensor([[-1.0, -1.0], [-2.0, -2.0]], dtype=torch.float64)
    old = torch.tensor([[-1.2, -1.0], [-2.0, -1.5]], dtype=torch.float64)
    adv = torch.tensor([1.0, -1.0], dtype=torch.float64)
    mask = torch.tensor([[1, 1], [1, 0]], dtype=torch.float64)

    def js(x):
        return 0.5 * (x * math.log(x) - (x + 1) * math.log((x + 1) / 2))

    terms = []
    for i, j in [(0, 0), (0, 1), (1, 0)]:
        a = adv[i].item()
        x = math.exp(lp[i, j].item() - old[i, j].item()) * math.exp(-a / eta)
        terms.append(math.exp(a / eta) * js(x))
    assert abs(obj.loss(lp, old, adv, mask).item() - sum(terms) / 3) < TOL


def test_lad_settings_validated():
    assert make("lad", mu=3).mu == 3
    with pytest.raises(ValueError, match="mu"):
        make("lad", mu=0)
    with pytest.raises(ValueError, match="eta"):
        make("lad", eta=0.0)
    with pytest.raises(ValueError, match="f must be"):
        make("lad", f="kl")


# -- vpo --------------------------------------------------------------------------------


def test_vpo_by_hand_with_the_same_draws():
    seed, K = 7, 5
    cv = np.array(
        [
            [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]],
            [[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]],
            [[0.0, 0.0, 1.0], [0.5, 0.5, 0.0]],
        ]
    )
    w = np.random.default_rng(seed).dirichlet(np.ones(3), size=K)  # VPO's documented draw
    R = []
    for g in range(3):
        total = 0.0
        for k in range(K):
            total += max(sum(w[k, t] * cv[g, j, t] for t in range(3)) for j in range(2))
        R.append(total / K)
    R = np.array(R)
    dev = R - R.sum() / 3
    expected = dev / (math.sqrt((dev**2).sum() / 2) + EPS)
    adv = make("vpo", m=2, K=K, seed=seed).advantages(
        RolloutGroup([0.0, 0.0, 0.0], candidate_vectors=cv)
    )
    np.testing.assert_allclose(adv, expected, atol=TOL)


def test_vpo_weight_free_case_is_grpo_of_best_candidate():
    # candidates with equal components: w . r = c for every w, so R_g = max_j c_gj
    cv = np.array([[[0.2, 0.2], [1.0, 1.0]], [[0.5, 0.5], [0.0, 0.0]], [[0.0, 0.0], [0.1, 0.1]]])
    R = np.array([1.0, 0.5, 0.1])
    dev = R - R.mean()
    std = math.sqrt((dev**2).sum() / 2)
    adv = make("vpo", m=2, K=3).advantages(RolloutGroup([0, 0, 0], candidate_vectors=cv))
    np.testing.assert_allclose(adv, dev / (std + EPS), atol=TOL)


def test_vpo_rewards_diverse_sets():
    # Dir(1,1): w1 ~ U(0,1); E[max(w1, 1 - w1)] = 3/4 for the diverse set, E[w1] = 1/2 redundant
    obj = make("vpo", m=2, K=20000, seed=3)
    cv = np.array([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [1.0, 0.0]]])
    R = obj.set_rewards(cv, obj.draw_weights(2))
    assert abs(R[0] - 0.75) < 0.01 and abs(R[1] - 0.5) < 0.01
    adv = obj.advantages(RolloutGroup([0.0, 0.0], candidate_vectors=cv))
    assert adv[0] > 0 > adv[1]


def test_vpo_errors():
    with pytest.raises(ValueError, match="candidate_vectors"):
        make("vpo").advantages(RolloutGroup([1.0, 0.0], reward_vectors=[[1, 0], [0, 1]]))
    with pytest.raises(ValueError, match="m=3 but"):
        make("vpo", m=3).advantages(RolloutGroup([1.0, 0.0], candidate_vectors=np.zeros((2, 2, 4))))
    with pytest.raises(ValueError, match="K must be"):
        make("vpo", K=0)
