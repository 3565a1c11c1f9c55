"""PolicyTrainer: one real optimisation step on a tiny GPT-2, losses, KL, LoRA, store round trips."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from qdevolve import registry
from qdevolve.db.store import LineageStore
from qdevolve.errors import ConfigError
from qdevolve.rl import RolloutGroup
from qdevolve.rl.config import TrainerConfig
from qdevolve.rl.sampling import completion_logprobs, encode_prompt, sample_batch, sample_group
from qdevolve.rl.tiny import build_model, build_tokenizer
from qdevolve.rl.trainer import PolicyTrainer, groups_from_store, surrogate_loss


@pytest.fixture
def tiny() -> tuple:
    torch.manual_seed(0)
    tok = build_tokenizer("0123456789:ab")
    model = build_model(tok, n_embd=32, n_layer=2, n_head=2, n_positions=32, seed=0)
    return model, tok


def _ids(tok, text: str) -> list[int]:
    return tok(text, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]


def _seq_logp(model, tok, prompt: str, completions: list[list[int]]) -> np.ndarray:
    with torch.no_grad():
        lp, mask, _ = completion_logprobs(model, [encode_prompt(tok, prompt)] * len(completions), completions,
                                          pad_id=tok.pad_token_id)
    return (lp * mask).sum(-1).numpy()


def _group(tok, prompt: str, texts: list[str], rewards: list[float]) -> RolloutGroup:
    return RolloutGroup(rewards=rewards, token_ids=[_ids(tok, t) for t in texts], prompt=prompt,
                        outcome_keys=texts)


@pytest.mark.parametrize("loss_type", ["grpo", "bnpo", "dr_grpo", "dapo"])
def test_one_step_moves_policy_toward_positive_advantage(tiny, loss_type: str) -> None:
    model, tok = tiny
    texts = ["12", "7", "12", "7"]
    group = _group(tok, "a:", texts, [1.0, 0.0, 1.0, 0.0])
    before = _seq_logp(model, tok, "a:", [_ids(tok, "12"), _ids(tok, "7")])
    trainer = PolicyTrainer(model, tok, registry.objective.create({"type": "grpo"}),
                            TrainerConfig(learning_rate=1e-3, loss_type=loss_type, max_completion_length=3))
    stats = trainer.step([group])
    after = _seq_logp(model, tok, "a:", [_ids(tok, "12"), _ids(tok, "7")])
    assert after[0] > before[0]  # positive advantage: log-prob rises
    assert after[1] < before[1]  # negative advantage: log-prob falls
    assert stats["step"] == 1.0 and stats["n_completions"] == 4.0
    assert np.isfinite(stats["loss"]) and stats["entropy"] > 0


def test_zero_advantage_group_leaves_policy_unchanged(tiny) -> None:
    model, tok = tiny
    params = [p.detach().clone() for p in model.parameters()]
    group = _group(tok, "a:", ["12", "7"], [1.0, 1.0])  # all correct: GRPO advantage 0
    PolicyTrainer(model, tok, registry.objective.create({"type": "grpo"}),
                  TrainerConfig(learning_rate=1e-2, weight_decay=0.0)).step([group])
    assert all(torch.equal(a, b) for a, b in zip(params, model.parameters(), strict=True))


def test_surrogate_loss_normalisations_by_hand() -> None:
    logp = torch.tensor([[-1.0, -2.0, 0.0], [-0.5, 0.0, 0.0]], requires_grad=True)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    adv = torch.tensor([2.0, -1.0])
    kw = {"epsilon": 0.2, "epsilon_high": 0.2, "max_completion_length": 4}
    # ratio = 1 at old == new: per-token loss = -A
    grpo, _ = surrogate_loss(logp, logp.detach(), adv, mask, loss_type="grpo", **kw)
    assert grpo.item() == pytest.approx(((-2 - 2) / 2 + 1 / 1) / 2)
    bnpo, _ = surrogate_loss(logp, logp.detach(), adv, mask, loss_type="bnpo", **kw)
    assert bnpo.item() == pytest.approx((-2 - 2 + 1) / 3)
    dr, _ = surrogate_loss(logp, logp.detach(), adv, mask, loss_type="dr_grpo", **kw)
    assert dr.item() == pytest.approx((-2 - 2 + 1) / (2 * 4))
    dapo, _ = surrogate_loss(logp, logp.detach(), adv, mask, loss_type="dapo", normalizer=10, **kw)
    assert dapo.item() == pytest.approx((-2 - 2 + 1) / 10)


def test_clipping_and_k3_kl_by_hand() -> None:
    old = torch.log(torch.tensor([[0.5]]))
    new = torch.log(torch.tensor([[0.8]]))  # ratio 1.6
    mask = torch.ones(1, 1)
    loss, stats = surrogate_loss(new, old, torch.tensor([1.0]), mask, epsilon=0.2, epsilon_high=0.28,
                                 loss_type="grpo")
    assert loss.item() == pytest.approx(-1.28)  # min(1.6, clip 1.28) * A
    assert stats["clip_fraction"] == 1.0
    ref = torch.log(torch.tensor([[0.4]]))
    loss, stats = surrogate_loss(new, new.detach(), torch.tensor([0.0]), mask, epsilon=0.2, epsilon_high=0.2,
                                 loss_type="grpo", beta=0.5, ref_logp=ref)
    kl = 0.4 / 0.8 - np.log(0.4 / 0.8) - 1
    assert stats["kl"] == pytest.approx(kl, rel=1e-5)
    assert loss.item() == pytest.approx(0.5 * kl, rel=1e-5)


def test_kl_reference_and_prorl_reset(tiny) -> None:
    model, tok = tiny
    trainer = PolicyTrainer(model, tok, registry.objective.create({"type": "grpo"}),
                            TrainerConfig(learning_rate=5e-3, beta=0.1, ref_reset_steps=2))
    group = _group(tok, "a:", ["12", "7", "3", "45"], [1.0, 0.0, 0.0, 1.0])
    s1 = trainer.step([group])
    s2 = trainer.step([group])  # second step: KL to the initial policy is > 0, then the reset
    assert s1["kl"] == pytest.approx(0.0, abs=1e-7)
    assert s2["kl"] > 0 and s2["ref_resets"] == 1
    ref = dict(trainer.ref_model.named_parameters())
    assert all(torch.equal(ref[n], p) for n, p in model.named_parameters())
    assert trainer.step([group])["kl"] == pytest.approx(0.0, abs=1e-7)


def test_num_iterations_and_gradient_accumulation(tiny) -> None:
    model, tok = tiny
    group = _group(tok, "a:", ["12", "7", "3", "45"], [1.0, 0.0, 0.0, 1.0])
    trainer = PolicyTrainer(model, tok, registry.objective.create({"type": "grpo"}),
                            TrainerConfig(learning_rate=1e-2, num_iterations=3, gradient_accumulation_steps=2))
    stats = trainer.step([group])
    assert trainer.global_step == 3 and stats["step"] == 3.0
    assert stats["ratio_mean"] != pytest.approx(1.0, abs=1e-6)  # later epochs are off-policy


def test_lad_hook_and_mu_hint(tiny) -> None:
    model, tok = tiny
    lad = registry.objective.create({"type": "lad", "mu": 2})
    trainer = PolicyTrainer(model, tok, lad, TrainerConfig(learning_rate=1e-3))
    assert trainer.num_iterations == 2
    before = _seq_logp(model, tok, "a:", [_ids(tok, "12"), _ids(tok, "7")])
    trainer.step([_group(tok, "a:", ["12", "7", "12", "7"], [1.0, 0.0, 1.0, 0.0])])
    after = _seq_logp(model, tok, "a:", [_ids(tok, "12"), _ids(tok, "7")])
    assert after[0] > before[0] and after[1] < before[1]


def test_lora_trains_adapters_only(tiny) -> None:
    model, tok = tiny
    base = {n: p.detach().clone() for n, p in model.named_parameters()}
    trainer = PolicyTrainer(model, tok, registry.objective.create({"type": "grpo"}),
                            TrainerConfig(learning_rate=1e-2, use_lora=True, lora_r=4))
    before = _seq_logp(trainer.model, tok, "a:", [_ids(tok, "12")])
    trainer.step([_group(tok, "a:", ["12", "7", "12", "7"], [1.0, 0.0, 1.0, 0.0])])
    after = _seq_logp(trainer.model, tok, "a:", [_ids(tok, "12")])
    assert after[0] > before[0]
    for n, p in trainer.model.named_parameters():
        if "lora_" not in n:
            key = n.replace("base_model.model.", "").replace(".base_layer", "")
            assert torch.equal(p, base[key]), n


def test_sample_group_is_seeded_and_logprobs_match(tiny) -> None:
    model, tok = tiny
    a = sample_group(model, tok, "a:", 4, 5, 1.0, torch.Generator().manual_seed(3))
    b = sample_group(model, tok, "a:", 4, 5, 1.0, torch.Generator().manual_seed(3))
    assert a == b and len(a) == 4
    text, ids, lps = a[0]
    assert len(ids) == len(lps) and 1 <= len(ids) <= 5
    rescored, mask, _ = completion_logprobs(model, [encode_prompt(tok, "a:")], [ids], pad_id=tok.pad_token_id)
    assert np.allclose(rescored[0, : len(ids)].detach().numpy(), lps, atol=1e-5)
    # left-padded batches give the same log-probs as single prompts
    batch = sample_batch(model, tok, ["a:", "ab12:"], 2, 4, 1.0, torch.Generator().manual_seed(1))
    for prompt, group in zip(["a:", "ab12:"], batch, strict=True):
        for _, ids, lps in group:
            r, _, _ = completion_logprobs(model, [encode_prompt(tok, prompt)], [ids], pad_id=tok.pad_token_id)
            assert np.allclose(r[0, : len(ids)].detach().numpy(), lps, atol=1e-5)


def test_versions_rollouts_and_resume(tiny, tmp_db: Path) -> None:
    model, tok = tiny
    store = LineageStore(tmp_db)
    trainer = PolicyTrainer(model, tok, registry.objective.create({"type": "grpo"}),
                            TrainerConfig(learning_rate=1e-3, beta=0.05), store=store)
    assert trainer.save_version() == 0
    group = _group(tok, "a:", ["12", "7", "3", "45"], [1.0, 0.0, 0.0, 1.0])
    group.reward_vectors = np.array([[1.0], [0.0], [0.0], [1.0]])
    trainer.write_rollouts([group])
    back, last = groups_from_store(store, trainer.run_id)
    assert last > 0 and len(back) == 1
    assert back[0].rewards.tolist() == [1.0, 0.0, 0.0, 1.0]
    assert back[0].outcome_keys == ("12", "7", "3", "45")
    assert [list(t) for t in back[0].token_ids] == [list(t) for t in group.token_ids]
    trainer.step(back)
    assert trainer.save_version(metrics={"note": 1}) == 1
    rows = store.policy_versions(trainer.run_id)
    assert [r["version"] for r in rows] == [0, 1] and rows[1]["parent_version"] == 0
    assert Path(rows[1]["path"]).is_dir() and rows[1]["path"].startswith(str(tmp_db.parent))
    assert store.get_state(trainer.run_id, "trainer")["version"] == 1
    resumed = PolicyTrainer.from_store(store, trainer.run_id, registry.objective.create({"type": "grpo"}),
                                       TrainerConfig(learning_rate=1e-3, beta=0.05))
    assert resumed.global_step == 1 and resumed.version == 1
    assert resumed.optimizer.state_dict()["state"].keys() == trainer.optimizer.state_dict()["state"].keys()
    ref_a = dict(trainer.ref_model.named_parameters())
    assert all(torch.equal(ref_a[n], p) for n, p in resumed.ref_model.named_parameters())
    cur = dict(trainer.model.named_parameters())
    assert all(torch.equal(cur[n], p) for n, p in resumed.model.named_parameters())
    assert resumed.save_version() == 2


def test_errors_are_actionable(tiny) -> None:
    model, tok = tiny
    trainer = PolicyTrainer(model, tok, registry.objective.create({"type": "grpo"}))
    with pytest.raises(ConfigError, match="needs a store"):
        trainer.save_version()
    with pytest.raises(ValueError, match="token_ids"):
        trainer.step([RolloutGroup(rewards=[1.0, 0.0], prompt="a:")])
    with pytest.raises(ConfigError, match="loss_type"):
        TrainerConfig(loss_type="nope")
    es = PolicyTrainer(model, tok, registry.objective.create({"type": "es", "population": 2}))
    with pytest.raises(ConfigError, match="es_step"):
        es.step([_group(tok, "a:", ["1", "2"], [1.0, 0.0])])


def test_prorl_reset_inside_a_multi_epoch_step_applies_to_the_remaining_epochs(tiny) -> None:
    """Hand-computed: with ref_reset_steps = 1 the reference is reset after every optimiser
    step, so each epoch starts with reference == current policy and its k3 KL is exactly 0;
    a reference kept for the whole step (the old behaviour) gives KL > 0 in epoch 2."""
    model, tok = tiny
    group = _group(tok, "a:", ["12", "7", "3", "45"], [1.0, 0.0, 0.0, 1.0])
    base = {n: p.detach().clone() for n, p in model.named_parameters()}
    cfg = TrainerConfig(learning_rate=5e-2, beta=0.1, num_iterations=3, ref_reset_steps=1)
    stats = PolicyTrainer(model, tok, registry.objective.create({"type": "grpo"}), cfg).step([group])
    assert stats["ref_resets"] == 3.0
    assert stats["kl"] == pytest.approx(0.0, abs=1e-7)
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(base[n])
    kept = PolicyTrainer(model, tok, registry.objective.create({"type": "grpo"}),
                         cfg.replace(ref_reset_steps=0)).step([group])
    assert kept["kl"] > 1e-6


@pytest.mark.parametrize("objective, field_name, hinted, chosen", [
    ({"type": "dr_grpo"}, "loss_type", "dr_grpo", "grpo"),  # the user picks the default on purpose
    ({"type": "dr_grpo"}, "loss_type", "dr_grpo", "bnpo"),
    ({"type": "lad", "mu": 3}, "num_iterations", 3, 1),     # the default again
    ({"type": "lad", "mu": 3}, "num_iterations", 3, 2),
])
def test_explicit_trainer_setting_beats_objective_hint(tiny, objective, field_name, hinted, chosen) -> None:
    model, tok = tiny
    attr = "loss_type" if field_name == "loss_type" else "num_iterations"
    left = PolicyTrainer(model, tok, registry.objective.create(dict(objective)), TrainerConfig())
    assert getattr(left, attr) == hinted  # None in the config: the objective decides
    set_ = PolicyTrainer(model, tok, registry.objective.create(dict(objective)), TrainerConfig(**{field_name: chosen}))
    assert getattr(set_, attr) == chosen
    plain = PolicyTrainer(model, tok, registry.objective.create({"type": "grpo"}), TrainerConfig())
    assert (plain.loss_type, plain.num_iterations) == ("grpo", 1)


def test_train_batch_names_the_flattened_fields(tiny) -> None:
    from qdevolve.rl.batch import TrainBatch

    model, tok = tiny
    trainer = PolicyTrainer(model, tok, registry.objective.create({"type": "grpo"}),
                            TrainerConfig(gradient_accumulation_steps=2, num_iterations=2))
    g = _group(tok, "a:", ["12", "7", "3"], [1.0, 0.0, 0.0])
    batch = trainer.batch([g])
    assert isinstance(batch, TrainBatch) and batch.size == 3 and len(batch.micro_batches) == 2
    assert batch.b_advantages.tolist() == pytest.approx(list(batch.group_advantages[0]))
    assert batch.old_logprobs is not None and batch.ref_logprobs is None  # two epochs: old policy recorded
    assert batch.n_tokens == sum(len(_ids(tok, t)) for t in ["12", "7", "3"])
