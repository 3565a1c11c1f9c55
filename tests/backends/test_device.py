"""Trainer and backend choose and share a model's device through one helper
(``qdevolve.backends.device``): the same answers, the same refusals, and a trainer that follows
a shared model a backend moved (checked on CPU with torch's ``meta`` device)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from transformers import ByT5Tokenizer, GPT2Config, GPT2LMHeadModel  # noqa: E402

from qdevolve import registry  # noqa: E402
from qdevolve.backends.device import model_device, place, resolve_device  # noqa: E402
from qdevolve.backends.transformers_backend import TransformersBackend  # noqa: E402
from qdevolve.errors import ConfigError  # noqa: E402
from qdevolve.rl.config import TrainerConfig  # noqa: E402
from qdevolve.rl.trainer import PolicyTrainer  # noqa: E402


def tiny() -> GPT2LMHeadModel:
    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(vocab_size=384, n_layer=1, n_embd=16, n_head=2, n_positions=32,
                                      bos_token_id=1, eos_token_id=1))


def test_resolve_device_names_and_refusals():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(torch.device("cpu")) == torch.device("cpu")
    assert resolve_device("auto") == resolve_device(None) == torch.device("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ConfigError, match="not a torch device"):
        resolve_device("gpu0")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="torch sees no CUDA device"):
            resolve_device("cuda")
    with pytest.raises(ConfigError, match=r"cuda:99"):
        resolve_device("cuda:99")


def test_trainer_and_backend_share_the_model_where_it_is():
    model = tiny()
    trainer = PolicyTrainer(model, ByT5Tokenizer(), registry.objective.create({"type": "grpo"}), TrainerConfig())
    backend = TransformersBackend(trainer.model, trainer.tokenizer, max_new_tokens=2)
    assert backend.model is trainer.model and backend.device == trainer.device == model_device(model)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_trainer_and_backend_refuse_a_missing_cuda_the_same_way():
    errors = []
    for build in (lambda: PolicyTrainer(tiny(), ByT5Tokenizer(), registry.objective.create({"type": "grpo"}),
                                        TrainerConfig(), device="cuda"),
                  lambda: TransformersBackend(tiny(), ByT5Tokenizer(), device="cuda")):
        with pytest.raises(ConfigError) as info:
            build()
        errors.append(str(info.value))
    assert errors[0] == errors[1] and "torch sees no CUDA device" in errors[0]


def test_the_trainer_follows_a_shared_model_a_backend_moved():
    trainer = PolicyTrainer(tiny(), ByT5Tokenizer(), registry.objective.create({"type": "grpo"}),
                            TrainerConfig(beta=0.1))
    p = next(trainer.model.parameters())
    trainer.optimizer.state[p]["exp_avg"] = torch.zeros_like(p)  # moments from an earlier step
    assert place(trainer.model, "meta") == torch.device("meta")  # what TransformersBackend(device=...) calls
    assert trainer.follow_device() == torch.device("meta") == trainer.device
    assert model_device(trainer.ref_model) == torch.device("meta")
    assert trainer.optimizer.state[p]["exp_avg"].device == torch.device("meta")
