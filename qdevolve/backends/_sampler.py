"""The transformers backend's sampling loop: one prefill per prompt, its KV cache shared by
every continuation of that prompt, then one batched decoding step per token.

Why not ``generate()``: it prefills each row separately (a group of G samples of one prompt
pays G prefills), computes logits for every prompt position, and keeps finished rows in the
batch. Here a chunk of rows is prefilled once per distinct prompt (left-padded, attention
mask, position ids from the mask; logits of the last position only), the cache is expanded
to the rows by index (``batch_select_indices``), and a row leaves the batch as soon as it
finishes (EOS, a stop string, or the token cap).

Per step, with logits ``z`` of the last position, temperature ``T`` and nucleus ``p``
(Holtzman et al. 2020, "The Curious Case of Neural Text Degeneration"):

    s = P_p(z / T)          (logits outside the smallest set of mass >= p set to -inf)
    y ~ softmax(s),         log pi(y) = log_softmax(s)[y]

and with ``T == 0``: ``y = argmax z``, ``log pi(y) = log_softmax(z)[y]``. The log-probs are
those of the distribution the token was drawn from, as the RL objectives need.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["Sampled", "sample_rows", "nucleus"]


@dataclass
class Sampled:
    """One continuation: its token ids, their behaviour log-probs, and why it ended."""

    ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish: str = "length"


def nucleus(scores: torch.Tensor, top_p: float) -> torch.Tensor:
    """``scores`` with tokens outside the top-``top_p`` probability mass set to -inf (the
    highest-scoring token always stays)."""
    if top_p >= 1.0:
        return scores
    ordered, order = torch.sort(scores, dim=-1)
    cum = ordered.softmax(-1).cumsum(-1)
    drop = cum <= (1.0 - top_p)
    drop[..., -1] = False
    return scores.masked_fill(drop.scatter(-1, order, drop), float("-inf"))


def _draw(probs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """One token per row by inverting the cumulative distribution: the first index whose
    cumulative mass reaches ``u * total`` with ``u`` uniform in (0, 1], so a zero-probability
    token is never drawn (``torch.multinomial`` does the same job several times slower on a
    50k vocabulary)."""
    cum = probs.cumsum(-1)
    u = 1.0 - torch.rand((probs.shape[0], 1), generator=generator, device=probs.device, dtype=cum.dtype)
    return torch.searchsorted(cum, u * cum[:, -1:]).clamp_(max=probs.shape[-1] - 1)


def _cache_kw(model: Any) -> str:
    """The forward argument that carries the KV cache (``cache`` in transformers 5)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # a peft wrapper forwards kwargs
    params = inspect.signature(base.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _forward(model: Any, kw: str, ids: torch.Tensor, mask: torch.Tensor, pos: torch.Tensor, cache: Any,
             last_only: bool) -> tuple[torch.Tensor, Any]:
    kwargs: dict[str, Any] = {"input_ids": ids, "attention_mask": mask, "position_ids": pos, kw: cache,
                              "use_cache": True}
    if last_only and "logits_to_keep" in inspect.signature(model.forward).parameters:
        kwargs["logits_to_keep"] = 1
    out = model(**kwargs)
    new_cache = out.cache if hasattr(out, "cache") and out.cache is not None else out.past_key_values
    return out.logits[:, -1, :].float(), new_cache


def sample_rows(model: Any, prompts: Sequence[Sequence[int]], rows: Sequence[int], *, temperature: float,
                top_p: float, max_new: int, eos: int | None, pad: int, stops: Sequence[str],
                decode: Callable[[list[int]], str], generator: torch.Generator | None) -> list[Sampled]:
    """Continue ``prompts[rows[i]]`` for every ``i`` (rows of one prompt share its prefill).

    Args:
        prompts: Distinct prompts' token ids (each non-empty).
        rows: For each continuation, the index of its prompt.
        eos: End-of-sequence id (kept as the last token of a row that emits it).
        stops: Stop strings; a row whose decoded text contains one finishes (the caller cuts
            the text right after it).
        decode: Token ids -> text, for the stop-string check.
        generator: Random source (``None``: torch's default).
    """
    device = next(model.parameters()).device
    kw = _cache_kw(model)
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, width - len(p):] = torch.tensor(list(p), dtype=torch.long)
        mask[i, width - len(p):] = 1
    ids, mask = ids.to(device), mask.to(device)
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    from transformers import DynamicCache

    logits, cache = _forward(model, kw, ids, mask, pos, DynamicCache(), last_only=True)
    index = torch.tensor(list(rows), dtype=torch.long, device=device)
    if len(rows) != len(prompts) or list(rows) != list(range(len(prompts))):
        cache.batch_select_indices(index)
        logits = logits[index]
    mask = mask[index]
    next_pos = mask.sum(-1, keepdim=True)
    out = [Sampled() for _ in rows]
    live = list(range(len(rows)))  # output row of each batch row
    window = 4 * max((len(s) for s in stops if s), default=0) + 2  # tokens (>= 1 byte each) a new stop can span
    for step in range(max_new):
        if temperature > 0:
            scores = nucleus(logits / temperature, top_p)
            logp = torch.log_softmax(scores, -1)
            token = _draw(logp.exp(), generator)
        else:
            logp = torch.log_softmax(logits, -1)
            token = logp.argmax(-1, keepdim=True)
        chosen = logp.gather(-1, token).squeeze(-1).tolist()
        tokens = token.squeeze(-1).tolist()
        keep: list[int] = []
        for b, (r, t, lp) in enumerate(zip(live, tokens, chosen, strict=True)):
            row = out[r]
            row.ids.append(int(t))
            row.logprobs.append(float(lp))
            if eos is not None and t == eos:
                row.finish = "stop"
            elif stops and any(s and s in decode(row.ids[-window:]) for s in stops):
                row.finish = "stop"
            else:
                keep.append(b)
        if not keep or step == max_new - 1:
            break
        if len(keep) < len(live):
            sel = torch.tensor(keep, dtype=torch.long, device=device)
            cache.batch_select_indices(sel)
            token, mask, next_pos = token[sel], mask[sel], next_pos[sel]
            live = [live[b] for b in keep]
        mask = torch.cat([mask, torch.ones_like(token)], dim=-1)
        logits, cache = _forward(model, kw, token, mask, next_pos, cache, last_only=False)
        next_pos = next_pos + 1
    return out
