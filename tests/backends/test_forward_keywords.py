"""forward_keywords: the cache and logits_to_keep keywords, read through a peft wrapper."""

from __future__ import annotations

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from qdevolve.backends.forward_keywords import forward_keywords
from qdevolve.rl.config import TrainerConfig
from qdevolve.rl.lora import wrap_lora


def _llama() -> torch.nn.Module:
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(vocab_size=40, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                        num_attention_heads=2, num_key_value_heads=1))


def test_a_peft_wrapper_takes_its_models_keywords() -> None:
    plain = forward_keywords(_llama())
    assert plain.cache in ("cache", "past_key_values") and plain.logits_to_keep
    assert forward_keywords(wrap_lora(_llama(), TrainerConfig(use_lora=True, lora_r=2))) == plain


def test_a_model_without_a_cache_has_none() -> None:
    class Plain(torch.nn.Module):
        def forward(self, input_ids, attention_mask=None, position_ids=None):  # noqa: ANN001, ANN201
            return input_ids

    kw = forward_keywords(Plain())
    assert kw.cache is None and not kw.logits_to_keep
