"""Sampling and scoring with a Hugging Face causal LM, for the trainer and the evaluators.

* :func:`sample_group` / :func:`sample_batch`: G completions per prompt with their token ids
  and the per-token log-probabilities of the sampling distribution (logits divided by the
  temperature, as TRL computes them), using a KV cache and a ``torch.Generator`` so a seed
  reproduces the samples. Prompts are left-padded with explicit ``position_ids`` so
  absolute-position models (GPT-2) see the same positions as an unpadded prompt.
* :func:`completion_logprobs`: per-token log-probs (and entropies) of given completions
  in one batched forward pass: the trainer's ``log pi_theta(o_t | q, o_<t)``.
* :func:`answer_logprobs`: ``log p(answer + EOS | prompt)`` of many candidate answers, for
  exact answer distributions over enumerable answer spaces.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import torch

from qdevolve.backends.device import model_device

__all__ = ["sample_group", "sample_batch", "completion_logprobs", "answer_logprobs", "encode_prompt"]

Sample = tuple[str, list[int], list[float]]


def encode_prompt(tokenizer: Any, prompt: str) -> list[int]:
    """Prompt token ids as the tokenizer's defaults give them (special tokens included)."""
    return list(tokenizer(prompt)["input_ids"])


def _left_pad(rows: Sequence[Sequence[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        if r:
            ids[i, width - len(r):] = torch.as_tensor(list(r), dtype=torch.long)
            mask[i, width - len(r):] = 1
    return ids, mask


def _cache_kw(model: Any) -> str:
    """The KV-cache keyword of ``model.forward`` (``cache`` in transformers >= 5.2x)."""
    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return "past_key_values"
    return "cache" if "cache" in params else "past_key_values"


def _cache_of(out: Any) -> Any:
    cache = getattr(out, "cache", None)
    return cache if cache is not None else out.past_key_values


def _positions(mask: torch.Tensor) -> torch.Tensor:
    return (mask.cumsum(-1) - 1).clamp(min=0)


@torch.no_grad()
def sample_batch(model: Any, tokenizer: Any, prompts: Sequence[str | Sequence[int]], G: int,
                 max_new_tokens: int, temperature: float = 1.0,
                 generator: torch.Generator | None = None, *, greedy: bool = False) -> list[list[Sample]]:
    """``G`` completions for each prompt: ``[[(text, token_ids, logprobs), ...], ...]``.

    ``token_ids`` include the end-of-sequence token when the model emitted one;
    ``logprobs[t] = log softmax(logits_t / temperature)[token_t]`` (0.0 under ``greedy``
    is not special-cased: it is the log-prob of the argmax token). Prompts may be texts
    or token id lists.
    """
    if G < 1 or max_new_tokens < 1:
        raise ValueError(f"sample_batch needs G >= 1 and max_new_tokens >= 1, got {G}, {max_new_tokens}")
    if temperature <= 0 and not greedy:
        raise ValueError(f"temperature must be > 0 (or use greedy=True), got {temperature}")
    was_training = model.training
    model.eval()
    device = model_device(model)
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    encoded = [encode_prompt(tokenizer, p) if isinstance(p, str) else list(p) for p in prompts]
    rows = [ids for ids in encoded for _ in range(G)]
    ids, mask = _left_pad(rows, pad)
    ids, mask = ids.to(device), mask.to(device)
    pos = _positions(mask)
    out = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True)
    kw = _cache_kw(model)
    past, logits = _cache_of(out), out.logits[:, -1]
    B = ids.shape[0]
    finished = torch.zeros(B, dtype=torch.bool, device=device)
    toks: list[torch.Tensor] = []
    lps: list[torch.Tensor] = []
    for _ in range(max_new_tokens):
        logp = torch.log_softmax(logits.float() / (1.0 if greedy else temperature), dim=-1)
        if greedy:
            nxt = logp.argmax(-1)
        else:
            nxt = torch.multinomial(logp.exp(), 1, generator=generator).squeeze(-1)
        lp = logp.gather(-1, nxt[:, None]).squeeze(-1)
        nxt = torch.where(finished, torch.full_like(nxt, pad), nxt)
        toks.append(nxt)
        lps.append(lp)
        finished = finished | (nxt == eos)
        if bool(finished.all()):
            break
        mask = torch.cat([mask, torch.ones((B, 1), dtype=mask.dtype, device=device)], dim=1)
        pos = pos[:, -1:] + 1
        out = model(input_ids=nxt[:, None], attention_mask=mask, position_ids=pos, use_cache=True, **{kw: past})
        past, logits = _cache_of(out), out.logits[:, -1]
    tok_mat = torch.stack(toks, 1).tolist()
    lp_mat = torch.stack(lps, 1).tolist()
    samples: list[Sample] = []
    for row_t, row_l in zip(tok_mat, lp_mat, strict=True):
        n = row_t.index(eos) + 1 if eos in row_t else len(row_t)
        text = tokenizer.decode([t for t in row_t[:n] if t != eos], skip_special_tokens=True)
        samples.append((text, row_t[:n], [float(x) for x in row_l[:n]]))
    if was_training:
        model.train()
    return [samples[i * G:(i + 1) * G] for i in range(len(encoded))]


def sample_group(model: Any, tokenizer: Any, prompt: str, G: int, max_new_tokens: int,
                 temperature: float = 1.0, generator: torch.Generator | None = None) -> list[Sample]:
    """``G`` sampled completions of one prompt: ``[(text, token_ids, logprobs), ...]``."""
    return sample_batch(model, tokenizer, [prompt], G, max_new_tokens, temperature, generator)[0]


def completion_logprobs(model: Any, prompt_ids: Sequence[Sequence[int]], completion_ids: Sequence[Sequence[int]],
                        *, pad_id: int, temperature: float = 1.0,
                        with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Per-token ``log softmax(logits / temperature)`` of each completion given its prompt.

    Prompts are left-padded and completions right-padded (TRL's layout), so the completion
    logits are one slice of the batch. Runs with the model's current grad mode.

    Returns:
        ``(logp [B, T], mask [B, T], entropy [B, T] or None)``.
    """
    p_ids, p_mask = _left_pad(prompt_ids, pad_id)
    T = max(1, max(len(c) for c in completion_ids))
    c_ids = torch.full((len(completion_ids), T), pad_id, dtype=torch.long)
    c_mask = torch.zeros((len(completion_ids), T), dtype=torch.float32)
    for i, c in enumerate(completion_ids):
        if c:
            c_ids[i, : len(c)] = torch.as_tensor(list(c), dtype=torch.long)
            c_mask[i, : len(c)] = 1.0
    device = model_device(model)
    ids = torch.cat([p_ids, c_ids], 1).to(device)
    att = torch.cat([p_mask, c_mask.long()], 1).to(device)
    pos = _positions(att)
    P = p_ids.shape[1]
    logits = model(input_ids=ids, attention_mask=att, position_ids=pos).logits[:, P - 1:-1].float()
    logits = logits / temperature
    logp_all = torch.log_softmax(logits, -1)
    logp = logp_all.gather(-1, c_ids.to(device)[..., None]).squeeze(-1)
    ent = None
    if with_entropy:
        ent = -(logp_all.exp() * logp_all).sum(-1)
    return logp, c_mask.to(device), ent


@torch.no_grad()
def answer_logprobs(model: Any, tokenizer: Any, prompt: str, answers: Sequence[str],
                    batch_size: int = 1024) -> torch.Tensor:
    """``log p(answer + EOS | prompt)`` for each answer (temperature 1), float64 ``[N]``."""
    was_training = model.training
    model.eval()
    p = encode_prompt(tokenizer, prompt)
    enc = tokenizer(list(answers), add_special_tokens=False)["input_ids"]
    eos = tokenizer.eos_token_id
    out = []
    for s in range(0, len(enc), batch_size):
        chunk = [[*a, eos] for a in enc[s:s + batch_size]]
        logp, mask, _ = completion_logprobs(model, [p] * len(chunk), chunk, pad_id=tokenizer.pad_token_id)
        out.append((logp * mask).sum(-1).double().cpu())
    if was_training:
        model.train()
    return torch.cat(out)
