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

from collections.abc import Sequence
from typing import Any

import torch

from qdevolve.backends.device import model_device
from qdevolve.backends.forward_keywords import forward_keywords

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


def _cache_of(out: Any) -> Any:
    cache = getattr(out, "cache", None)
    return cache if cache is not None else getattr(out, "past_key_values", None)


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
    kw = forward_keywords(model).cache or "past_key_values"
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
                        *, pad_id: int, temperature: float = 1.0, with_entropy: bool = False,
                        share_prompts: bool | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Per-token ``log softmax(logits / temperature)`` of each completion given its prompt.

    Prompts are left-padded and completions right-padded (TRL's layout), so the completion
    logits are one slice of the batch. Runs with the model's current grad mode.

    Rows with the same prompt (a GRPO group's G completions) share one forward pass over it
    when that saves work (``share_prompts=None``: :func:`shares_prompts`): the distinct
    prompts run once with a KV cache, the cache is indexed out to the rows, and the
    completions run on top of it. The result, and its gradient (which flows back through the
    shared cache into the prompt pass, summed over the rows), equals the one-pass layout's
    up to floating-point rounding, at ``U * P + B * T`` tokens instead of ``B * (P + T)``
    (``U`` distinct prompts of ``P`` tokens, ``B`` rows of ``T`` completion tokens).
    Only the logits of the positions that predict completion tokens are computed where the
    model takes ``logits_to_keep``.

    Returns:
        ``(logp [B, T], mask [B, T], entropy [B, T] or None)``.
    """
    T = max(1, max(len(c) for c in completion_ids))
    c_ids = torch.full((len(completion_ids), T), pad_id, dtype=torch.long)
    c_mask = torch.zeros((len(completion_ids), T), dtype=torch.float32)
    for i, c in enumerate(completion_ids):
        if c:
            c_ids[i, : len(c)] = torch.as_tensor(list(c), dtype=torch.long)
            c_mask[i, : len(c)] = 1.0
    device = model_device(model)
    forward = _ScoringForward(model)
    distinct, rows = _distinct(prompt_ids)
    share = shares_prompts([len(p) for p in distinct], len(rows), T) if share_prompts is None else share_prompts
    logits = None
    if share and forward.caches() and all(distinct):
        logits = _shared_prompt_logits(forward, distinct, rows, c_ids, c_mask, pad_id, device)
    if logits is None:
        p_ids, p_mask = _left_pad(prompt_ids, pad_id)
        ids = torch.cat([p_ids, c_ids], 1).to(device)
        att = torch.cat([p_mask, c_mask.long()], 1).to(device)
        logits = forward(ids, att, _positions(att), keep=T + 1)[:, -(T + 1):-1]
    logits = logits.float() / temperature
    logp_all = torch.log_softmax(logits, -1)
    logp = logp_all.gather(-1, c_ids.to(device)[..., None]).squeeze(-1)
    ent = None
    if with_entropy:
        ent = -(logp_all.exp() * logp_all).sum(-1)
    return logp, c_mask.to(device), ent


def shares_prompts(prompt_lengths: Sequence[int], n_rows: int, completion_length: int) -> bool:
    """Whether ``n_rows`` completions of ``completion_length`` tokens over the distinct prompts
    of ``prompt_lengths`` should share their prompts' pass: when the tokens it saves,
    ``(n_rows - U) * P`` with ``P`` the longest prompt (the padded width), are at least a
    quarter of the one-pass layout's ``n_rows * (P + completion_length)`` (a second, smaller
    forward pass costs a fixed overhead that a few saved tokens do not repay)."""
    if not prompt_lengths or n_rows <= len(prompt_lengths):
        return False
    width = max(prompt_lengths)
    return 4 * (n_rows - len(prompt_lengths)) * width >= n_rows * (width + completion_length)


def _distinct(prompt_ids: Sequence[Sequence[int]]) -> tuple[list[list[int]], list[int]]:
    """The distinct prompts in order of first appearance, and each row's index into them."""
    index: dict[tuple[int, ...], int] = {}
    rows = [index.setdefault(tuple(p), len(index)) for p in prompt_ids]
    return [list(p) for p in index], rows


def _shared_prompt_logits(forward: _ScoringForward, distinct: list[list[int]], rows: list[int], c_ids: torch.Tensor,
                          c_mask: torch.Tensor, pad_id: int, device: Any) -> torch.Tensor | None:
    """Logits ``[B, T, V]`` predicting each row's completion tokens, the prompts run once each;
    ``None`` when the model returned no cache (e.g. activation checkpointing turns it off)."""
    p_ids, p_mask = _left_pad(distinct, pad_id)
    p_ids, p_mask = p_ids.to(device), p_mask.to(device)
    first, cache = forward.with_cache(p_ids, p_mask, _positions(p_mask), forward.new_cache(), keep=1)
    if cache is None or not hasattr(cache, "batch_select_indices") or cache.get_seq_length() != p_ids.shape[1]:
        return None
    index = torch.tensor(rows, dtype=torch.long, device=device)
    if rows != list(range(len(distinct))):
        cache.batch_select_indices(index)
    first = first[index, -1:]  # predicts each completion's first token
    T = c_ids.shape[1]
    if T == 1:
        return first
    att = torch.cat([p_mask[index], c_mask.long().to(device)], 1)[:, :-1]
    pos = p_mask[index].sum(-1, keepdim=True) + torch.arange(T - 1, device=device)
    rest, _ = forward.with_cache(c_ids[:, :-1].to(device), att, pos, cache, keep=0)
    return torch.cat([first, rest], 1)


class _ScoringForward:
    """``model(...)`` for scoring, with the keywords the model takes (:func:`forward_keywords`:
    the cache keyword, ``None`` for a model without a KV cache, and ``logits_to_keep``)."""

    def __init__(self, model: Any) -> None:
        self.model = model
        keywords = forward_keywords(model)
        self.cache_kw = keywords.cache
        self.keep = keywords.logits_to_keep

    def caches(self) -> bool:
        """Whether a pass returns a usable KV cache: the model takes one, and no activation
        checkpointing is on while gradients are recorded (it turns the cache off in training)."""
        if self.cache_kw is None:
            return False
        base = self.model.get_base_model() if hasattr(self.model, "get_base_model") else self.model
        flag = getattr(base, "is_activation_checkpointing", None)
        if flag is None:
            flag = getattr(base, "is_gradient_checkpointing", False)
        return not (flag and base.training and torch.is_grad_enabled())

    def new_cache(self) -> Any:
        from transformers import DynamicCache

        return DynamicCache()

    def __call__(self, ids: torch.Tensor, mask: torch.Tensor, pos: torch.Tensor, *, keep: int) -> torch.Tensor:
        kwargs: dict[str, Any] = {"input_ids": ids, "attention_mask": mask, "position_ids": pos}
        if self.keep and keep:
            kwargs["logits_to_keep"] = keep
        return self.model(**kwargs).logits

    def with_cache(self, ids: torch.Tensor, mask: torch.Tensor, pos: torch.Tensor, cache: Any,
                   *, keep: int) -> tuple[torch.Tensor, Any]:
        kwargs: dict[str, Any] = {"input_ids": ids, "attention_mask": mask, "position_ids": pos,
                                  self.cache_kw or "past_key_values": cache, "use_cache": True}
        if self.keep and keep:
            kwargs["logits_to_keep"] = keep
        out = self.model(**kwargs)
        return out.logits, _cache_of(out)


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
