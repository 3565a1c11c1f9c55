"""The ``transformers`` backend switches between a LoRA run's adapter versions in place: the
base's weight tensors stay the same objects (never reloaded), outputs follow the active
version, at most ``max_adapters`` stay loaded, and a version of another base is refused. The
``vllm`` backend's ``LoRARequest`` arguments come from the same directories (no vLLM needed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from transformers import AutoModelForCausalLM, ByT5Tokenizer, LlamaConfig, LlamaForCausalLM  # noqa: E402

from qdevolve import registry  # noqa: E402
from qdevolve.backends.adapters import base_identity  # noqa: E402
from qdevolve.backends.base import GenerationRequest  # noqa: E402
from qdevolve.backends.transformers_backend import TransformersBackend  # noqa: E402
from qdevolve.backends.vllm_backend import engine_base, lora_request_args  # noqa: E402
from qdevolve.db.store import LineageStore  # noqa: E402
from qdevolve.errors import ConfigError  # noqa: E402
from qdevolve.rl.config import TrainerConfig  # noqa: E402
from qdevolve.rl.group import RolloutGroup  # noqa: E402
from qdevolve.rl.sampling import sample_group  # noqa: E402
from qdevolve.rl.trainer import PolicyTrainer  # noqa: E402


def save_base(path: Path, seed: int = 0) -> Path:
    torch.manual_seed(seed)
    LlamaForCausalLM(LlamaConfig(vocab_size=384, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                 bos_token_id=1, eos_token_id=1, pad_token_id=0)).save_pretrained(path)
    ByT5Tokenizer().save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def versions(tmp_path_factory):
    """A base directory and the adapter directories of a 3-step LoRA run over it."""
    tmp = tmp_path_factory.mktemp("swap")
    base = save_base(tmp / "base")
    store = LineageStore(tmp / "run.sqlite")
    trainer = PolicyTrainer(AutoModelForCausalLM.from_pretrained(base), ByT5Tokenizer(),
                            registry.objective.create({"type": "grpo"}),
                            TrainerConfig(use_lora=True, lora_r=4, learning_rate=0.2), store=store)
    trainer.save_version()
    gen = torch.Generator().manual_seed(0)
    for _ in range(3):
        s = sample_group(trainer.model, trainer.tokenizer, "hello", 4, 6, generator=gen)
        trainer.step([RolloutGroup(rewards=np.array([1.0, 0.0, 1.0, 0.0]), token_ids=[x[1] for x in s],
                                   prompt="hello")])
        trainer.save_version()
    return base, [r["path"] for r in store.policy_versions(trainer.run_id)]


REQ = GenerationRequest(prompt="hello world", temperature=1.0, max_tokens=6, seed=11)


def sample(backend: TransformersBackend) -> list[float]:
    c = backend.generate_sync([REQ])[0][0]
    return c.logprobs


def test_adapter_versions_switch_in_place_over_one_base(versions):
    base, paths = versions
    backend = TransformersBackend(str(base), max_new_tokens=6, max_adapters=2)
    q = backend.model.model.layers[0].self_attn.q_proj.weight
    embed = backend.model.get_input_embeddings().weight
    plain = sample(backend)
    backend.load_policy(3, paths[3])
    v3 = sample(backend)
    backend.load_policy(1, paths[1])
    v1 = sample(backend)
    assert v3 != plain and v1 != v3  # each version is the one sampled
    inner = backend.model.get_base_model()
    assert inner.model.layers[0].self_attn.q_proj.base_layer.weight is q  # the base's tensors, not reloaded
    assert backend.model.get_input_embeddings().weight is embed
    assert backend.model.active_adapter == "v1" and list(backend.adapters.loaded) == ["v3", "v1"]
    backend.load_policy(3, paths[3])  # still loaded: switched back, not read again
    assert sample(backend) == v3 and list(backend.adapters.loaded) == ["v1", "v3"]
    backend.load_policy(2, paths[2])  # a third adapter: the least recently used one (v1) goes
    assert list(backend.adapters.loaded) == ["v3", "v2"] and set(backend.model.peft_config) == {"v3", "v2"}
    backend.load_policy(1, paths[1])  # read again after eviction
    assert sample(backend) == v1
    assert backend.generate_sync([REQ])[0][0].policy_version == 1
    assert not any(p.requires_grad for p in backend.model.parameters())  # sampling only


def test_version_zero_of_a_lora_run_samples_like_its_base(versions):
    base, paths = versions
    backend = TransformersBackend(str(base), max_new_tokens=6)
    plain = sample(backend)
    backend.load_policy(0, paths[0])
    assert np.allclose(sample(backend), plain, atol=1e-5)  # B = 0 at the start


def test_an_adapter_of_another_base_is_refused_by_both_backends(versions, tmp_path):
    base, paths = versions
    other = save_base(tmp_path / "other", seed=3)
    backend = TransformersBackend(str(other), max_new_tokens=4)
    with pytest.raises(ConfigError) as info:
        backend.load_policy(2, paths[2])
    msg = str(info.value)
    assert "policy version 2" in msg and base_identity(base).sha256[:16] in msg
    assert base_identity(other).sha256[:16] in msg
    assert not hasattr(backend.model, "peft_config")  # nothing was injected
    with pytest.raises(ConfigError, match="was trained on base"):
        lora_request_args(2, paths[2], engine_base(str(other)))
    # a loaded model object of unknown origin: the recorded base cannot be checked, so it is refused
    anon = TransformersBackend(LlamaForCausalLM(AutoModelForCausalLM.from_pretrained(base).config),
                               ByT5Tokenizer(), max_new_tokens=4)
    with pytest.raises(ConfigError, match="no known identity"):
        anon.load_policy(1, paths[1])
    # the same object told its base: accepted
    told = TransformersBackend(AutoModelForCausalLM.from_pretrained(base), ByT5Tokenizer(), max_new_tokens=4,
                               base=str(base))
    told.load_policy(1, paths[1])
    assert told.model.active_adapter == "v1"


def test_vllm_lora_requests_are_the_adapter_directories(versions):
    base, paths = versions
    assert lora_request_args(2, paths[2], engine_base(str(base))) == ("policy-v2", 3, str(Path(paths[2])))
    assert lora_request_args(0, paths[0])[1] == 1  # ids start at 1
    with pytest.raises(ConfigError, match="full model directory, not a LoRA adapter"):
        lora_request_args(1, str(base))
    assert engine_base("HuggingFaceTB/SmolLM2-135M") is None  # a hub id: not a local directory
    with pytest.raises(ValueError):
        lora_request_args(-1, paths[0])


def test_the_ray_policy_actor_body_loads_an_adapter_sent_as_its_files(versions):
    """``transfer: weights`` with a LoRA run: the version's three files travel, the actor's
    backend switches in place (the actor body is a plain class; no Ray needed here)."""
    from qdevolve.backends.ray_policy import PolicyServer

    base, paths = versions
    server = PolicyServer({"type": "transformers", "model": str(base), "max_new_tokens": 6}, None)
    files = {f.name: f.read_bytes() for f in Path(paths[2]).iterdir() if f.name != "trainer_state.pt"}
    assert server.load_adapter_files(2, files) == 2
    assert server.backend.model.active_adapter == "v2" and server.backend.policy_version == 2
    direct = TransformersBackend(str(base), max_new_tokens=6)
    direct.load_policy(2, paths[2])
    assert sample(server.backend) == sample(direct)
    with pytest.raises(ValueError, match="adapter files must be among"):
        server.load_adapter_files(3, {**files, "model.py": b"import os"})
    assert server.load_adapter_files(1, files) == 2  # versions only move forward
