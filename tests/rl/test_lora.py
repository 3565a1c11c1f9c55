"""LoRA targets and weight layout come from the model's module types, for GPT-2 (Conv1D)
and Llama/Qwen (Linear) models built from config, and a LoRA step changes only adapters."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("peft")

from transformers import (  # noqa: E402
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
)

from qdevolve.errors import ConfigError  # noqa: E402
from qdevolve.rl.lora import lora_targets  # noqa: E402

LLAMA = ["down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"]


def gpt2() -> GPT2LMHeadModel:
    return GPT2LMHeadModel(GPT2Config(vocab_size=64, n_layer=1, n_embd=16, n_head=2, n_positions=32))


def llama(cls=LlamaForCausalLM, cfg=LlamaConfig, **kw):
    kw = {"vocab_size": 64, **kw}
    return cls(cfg(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                   num_key_value_heads=1, max_position_embeddings=32, **kw))


def test_gpt2_gets_conv1d_names_transposed_and_llama_qwen_get_linear_names():
    assert lora_targets(gpt2()) == (["c_attn", "c_fc", "c_proj"], True)
    assert lora_targets(llama()) == (LLAMA, False)
    assert lora_targets(llama(tie_word_embeddings=True)) == (LLAMA, False)
    assert lora_targets(llama(Qwen2ForCausalLM, Qwen2Config)) == (LLAMA, False)
    assert lora_targets(llama(), ["q_proj", "v_proj"]) == (["q_proj", "v_proj"], False)


def test_names_that_match_nothing_or_mixed_layouts_are_refused():
    with pytest.raises(ConfigError, match="no Linear or Conv1D module named any of c_attn"):
        lora_targets(llama(), ["c_attn"])
    mixed = gpt2()
    mixed.transformer.h[0].mlp.c_fc = torch.nn.Linear(16, 64)
    with pytest.raises(ConfigError, match=r"mixes Conv1D \(c_attn, c_proj\) and Linear"):
        lora_targets(mixed)


def test_trainer_wraps_a_llama_with_adapters_on_every_projection():
    from qdevolve import registry
    from qdevolve.rl.config import TrainerConfig
    from qdevolve.rl.trainer import PolicyTrainer

    tok = transformers.ByT5Tokenizer()
    trainer = PolicyTrainer(llama(vocab_size=384), tok, registry.objective.create({"type": "grpo"}),
                            TrainerConfig(use_lora=True, lora_r=2, beta=0.0))
    adapted = {n.split(".lora_A")[0].rsplit(".", 1)[-1] for n, _ in trainer.model.named_parameters() if "lora_A" in n}
    assert sorted(adapted) == LLAMA
    assert trainer.model.peft_config["default"].fan_in_fan_out is False
