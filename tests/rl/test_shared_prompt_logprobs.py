"""completion_logprobs: rows of one prompt share its forward pass, with the one-pass layout's
log-probs, entropies and gradients, and the prompt runs once per distinct prompt."""

from __future__ import annotations

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

from qdevolve.rl.config import TrainerConfig
from qdevolve.rl.lora import wrap_lora
from qdevolve.rl.sampling import completion_logprobs, shares_prompts

V = 50


def _llama() -> torch.nn.Module:
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, bos_token_id=1,
                                        eos_token_id=2, pad_token_id=0))


def _gpt2() -> torch.nn.Module:
    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(vocab_size=V, n_embd=32, n_layer=2, n_head=4, resid_pdrop=0.0,
                                      embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=1, eos_token_id=2))


def _batch(seed: int = 1) -> tuple[list[list[int]], list[list[int]]]:
    """Three prompts of unequal length, interleaved over nine rows (one empty completion)."""
    g = torch.Generator().manual_seed(seed)
    prompts = [torch.randint(3, V, (n,), generator=g).tolist() for n in (7, 12, 3)]
    comps = [torch.randint(3, V, (n,), generator=g).tolist() for n in (5, 1, 6, 4, 2, 5, 3, 0, 6)]
    return [prompts[i % 3] for i in range(len(comps))], comps


def _scored(model: torch.nn.Module, share: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    prompts, comps = _batch()
    model.zero_grad()
    lp, mask, ent = completion_logprobs(model, prompts, comps, pad_id=0, temperature=0.7, with_entropy=True,
                                        share_prompts=share)
    assert ent is not None
    ((lp * mask).sum() + 0.1 * (ent * mask).sum()).backward()
    grads = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
    return lp * mask, ent * mask, grads


@pytest.mark.parametrize("make", [_llama, _gpt2], ids=["llama", "gpt2"])
def test_shared_prompts_give_the_one_pass_logprobs_entropies_and_gradients(make) -> None:
    model = make()
    one_pass = _scored(model, share=False)
    shared = _scored(model, share=True)
    for a, b in zip(one_pass, shared, strict=True):
        assert a.shape == b.shape
        torch.testing.assert_close(b, a, atol=2e-5, rtol=1e-5)
    assert one_pass[2].abs().sum() > 0  # the gradient is not trivially zero


def test_shared_prompts_train_a_lora_adapter_like_the_one_pass_layout() -> None:
    model = wrap_lora(_llama(), TrainerConfig(use_lora=True, lora_r=2))
    one_pass, shared = _scored(model, share=False), _scored(model, share=True)
    torch.testing.assert_close(shared[2], one_pass[2], atol=2e-5, rtol=1e-5)
    assert shared[2].numel() < sum(p.numel() for p in model.parameters())  # adapter weights only


def _tokens_seen(model: torch.nn.Module, share: bool | None, grad: bool = False) -> tuple[int, list[int]]:
    """Input tokens of every forward pass, and the logit positions each pass returned."""
    seen: list[int] = []
    logit_positions: list[int] = []
    embed = model.get_input_embeddings()
    h1 = embed.register_forward_hook(lambda _m, args, _out: seen.append(args[0].numel()))
    h2 = model.get_output_embeddings().register_forward_hook(lambda _m, _a, out: logit_positions.append(out.shape[1]))
    prompts, comps = _batch()
    try:
        with torch.set_grad_enabled(grad):
            completion_logprobs(model, prompts, comps, pad_id=0, share_prompts=share)
    finally:
        h1.remove()
        h2.remove()
    return sum(seen), logit_positions


def test_each_distinct_prompt_runs_once_and_the_rows_run_their_completions_only() -> None:
    prompts, comps = _batch()
    width, T, B = max(len(p) for p in prompts), max(len(c) for c in comps), len(comps)
    tokens, _ = _tokens_seen(_llama(), share=True)
    assert tokens == 3 * width + B * (T - 1)  # 3 distinct prompts, then each row's completion inputs
    model = _llama()
    model.train()
    assert _tokens_seen(model, share=True, grad=True)[0] == tokens  # the loss's pass too
    one_pass, _ = _tokens_seen(_llama(), share=False)
    assert one_pass == B * (width + T)


def test_only_the_positions_that_predict_completion_tokens_get_logits() -> None:
    prompts, comps = _batch()
    T = max(len(c) for c in comps)
    _, one_pass = _tokens_seen(_llama(), share=False)
    assert one_pass == [T + 1]  # not width + T: the prompt's positions cost no vocabulary projection
    _, shared = _tokens_seen(_llama(), share=True)
    assert shared == [1, T - 1]


def test_the_default_shares_a_groups_prompt_and_not_distinct_prompts() -> None:
    # a GRPO group: G = 4 completions of one 600-token prompt
    assert shares_prompts([600, 593], n_rows=8, completion_length=128)
    assert not shares_prompts([600] * 8, n_rows=8, completion_length=128)  # nothing to share
    assert not shares_prompts([5, 5], n_rows=3, completion_length=200)  # saves too little to pay a second pass
    assert not shares_prompts([], n_rows=0, completion_length=1)
    tokens, _ = _tokens_seen(_llama(), share=None)
    prompts, comps = _batch()
    assert tokens < len(comps) * (max(map(len, prompts)) + max(map(len, comps)))


def test_a_model_that_returns_no_cache_is_scored_in_one_pass() -> None:
    """Activation checkpointing turns the KV cache off in training: the shared layout falls back."""
    model = _llama()
    model.gradient_checkpointing_enable()
    model.train()
    one_pass = _scored(model, share=False)
    shared = _scored(model, share=True)
    for a, b in zip(one_pass, shared, strict=True):
        torch.testing.assert_close(b, a, atol=2e-5, rtol=1e-5)
    prompts, comps = _batch()
    assert _tokens_seen(model, share=True, grad=True)[0] == len(comps) * (max(map(len, prompts)) + max(map(len, comps)))
