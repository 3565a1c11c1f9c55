"""The transformers backend's sampling loop: one prefill per prompt, its KV cache shared by
every continuation of that prompt, then one batched decoding step per token.

Why not ``generate()``: it prefills each row separately (a group of G samples of one prompt
pays G prefills), computes logits for every prompt position, and keeps finished rows in the
batch. Here a chunk of rows is prefilled once per distinct prompt (left-padded, attention
mask, position ids from the mask; logits of the last position only), the cache is expanded
to the rows by index (``batch_select_indices``), and a row leaves the batch as soon as it
finishes (EOS, a stop string, or the token cap): finished rows cost no further compute.

Per step, with logits ``z`` of the last position, temperature ``T`` and nucleus ``p``
(Holtzman et al. 2020, "The Curious Case of Neural Text Degeneration"):

    s = P_p(z / T)          (logits outside the smallest set of mass >= p set to -inf)
    y ~ softmax(s),         log pi(y) = s_y - logsumexp(s)

and with ``T == 0``: ``y = argmax z``, ``log pi(y) = z_y - logsumexp(z)``. The log-probs are
those of the distribution the token was drawn from, as the RL objectives need.

What a step costs beyond the model's forward pass (measured in BENCHMARKS.md, "Sampling a
real model"): the draw touches the ``B x V`` logits a few times (max, exp, cumulative sum;
no full-vocabulary log-softmax is materialised, the chosen token's log-prob is
``s_y - m - log sum exp(s - m)``); the nucleus sorts only the top ``k`` candidates (``k``
grows until they hold mass ``p``, so the filter is the full sort's); the attention mask and
the KV cache live in buffers allocated once for ``prompt + max_new`` positions and are
written in place (transformers' ``DynamicCache`` concatenates every layer's keys and values
on every step, copying the whole cache each token).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from qdevolve.backends.forward_keywords import forward_keywords

__all__ = ["Sampled", "sample_rows", "nucleus", "nucleus_topk", "draw"]


@dataclass
class Sampled:
    """One continuation: its token ids, their behaviour log-probs, and why it ended."""

    ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish: str = "length"


def nucleus(scores: torch.Tensor, top_p: float) -> torch.Tensor:
    """``scores`` with tokens outside the top-``top_p`` probability mass set to -inf (the
    highest-scoring token always stays). Full sort of the vocabulary: the reference that
    :func:`nucleus_topk` is tested against (same rule as Hugging Face's ``TopPLogitsWarper``:
    drop a token when the ascending cumulative mass up to and including it is ``<= 1 - p``)."""
    if top_p >= 1.0:
        return scores
    ordered, order = torch.sort(scores, dim=-1)
    cum = ordered.softmax(-1).cumsum(-1)
    drop = cum <= (1.0 - top_p)
    drop[..., -1] = False
    return scores.masked_fill(drop.scatter(-1, order, drop), float("-inf"))


def nucleus_topk(scores: torch.Tensor, top_p: float, k: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """The nucleus of each row as ``(values, index)``: the ``k`` highest scores in
    descending order and their token ids, with scores outside the nucleus set to -inf.

    A token of descending rank ``j`` is kept when the mass ranked above it is ``< p`` (the
    rule of :func:`nucleus`: its ascending cumulative mass ``1 - mass_above`` is ``> 1 - p``).
    ``k`` doubles until every row's top ``k`` hold mass ``>= p`` (then no token outside them
    can be kept), so the result equals a full sort's while a peaked distribution sorts a few
    dozen entries instead of the vocabulary.
    """
    vocab = scores.shape[-1]
    m = scores.amax(-1, keepdim=True)
    total = (scores - m).exp_().sum(-1, keepdim=True)
    while True:
        k = min(k, vocab)
        values, index = scores.topk(k, dim=-1)
        mass = (values - m).exp_()
        above = mass.cumsum(-1) - mass  # mass ranked strictly above each candidate
        if k == vocab or bool((above[:, -1:] + mass[:, -1:] >= top_p * total).all()):
            break
        k *= 2
    keep = above < top_p * total
    keep[:, 0] = True
    return values.masked_fill(~keep, float("-inf")), index


def _uniform(rows: int, generator: Any, device: Any, dtype: torch.dtype) -> torch.Tensor:
    """``(rows, 1)`` uniforms in [0, 1): from one generator, or row ``i`` from ``generator[i]``
    (requests with different seeds share a batch and each still draws its own stream)."""
    if generator is None or isinstance(generator, torch.Generator):
        return torch.rand((rows, 1), generator=generator, device=device, dtype=dtype)
    if len(generator) != rows:
        raise ValueError(f"{len(generator)} generators for {rows} rows")
    return torch.cat([torch.rand((1, 1), generator=g, device=device, dtype=dtype) for g in generator])


def draw(scores: torch.Tensor, generator: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """One column per row of ``softmax(scores)`` and its log-prob: ``(column, log pi)``.

    Inverts the cumulative distribution: the first column whose cumulative mass reaches
    ``u * total`` with ``u`` uniform in (0, 1], so a zero-probability (-inf) column is never
    drawn (``torch.multinomial`` does the same job several times slower on a 50k vocabulary).
    ``log pi = s_y - m - log total`` with ``m`` the row maximum and ``total = sum exp(s - m)``,
    the same normaliser the draw used.
    """
    m = scores.amax(-1, keepdim=True)
    cum = (scores - m).exp_().cumsum_(-1)
    total = cum[:, -1:]
    u = 1.0 - _uniform(scores.shape[0], generator, scores.device, cum.dtype)
    col = torch.searchsorted(cum, u * total).clamp_(max=scores.shape[-1] - 1)
    return col, scores.gather(-1, col) - m - total.log()


@functools.cache
def _buffered_layer_class() -> type | None:
    """A transformers ``DynamicLayer`` whose keys and values live in a buffer allocated once
    for ``capacity`` positions and written in place (:meth:`update` returns views of the
    filled part), or ``None`` when this transformers has no layered cache API (before 4.56:
    the plain ``DynamicCache``). Built on first use so that importing this module does not
    import transformers."""
    try:
        from transformers.cache_utils import DynamicLayer
    except ImportError:
        return None

    class BufferedLayer(DynamicLayer):
        """One layer's KV cache in a preallocated buffer (see :func:`_buffered_layer_class`)."""

        def __init__(self, capacity: int) -> None:
            super().__init__()
            self.capacity, self.length = int(capacity), 0
            self._k: torch.Tensor | None = None
            self._v: torch.Tensor | None = None

        def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
            self.device = key_states.device
            b, h, _, d = key_states.shape
            cap = max(self.capacity, key_states.shape[-2])
            self._k = key_states.new_empty((b, h, cap, d))
            self._v = value_states.new_empty((b, value_states.shape[1], cap, value_states.shape[-1]))
            self.is_initialized = True

        def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
                   **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            end = self.length + key_states.shape[-2]
            if end > self._k.shape[-2]:  # past the planned capacity: grow (doubling), never truncate
                grow = max(end, 2 * self._k.shape[-2]) - self._k.shape[-2]
                self._k = torch.cat([self._k, self._k.new_empty((*self._k.shape[:2], grow, self._k.shape[-1]))], -2)
                self._v = torch.cat([self._v, self._v.new_empty((*self._v.shape[:2], grow, self._v.shape[-1]))], -2)
            self._k[:, :, self.length:end] = key_states
            self._v[:, :, self.length:end] = value_states
            self.length = end
            self.keys, self.values = self._k[:, :, :end], self._v[:, :, :end]
            return self.keys, self.values

        def get_seq_length(self) -> int:
            return self.length

        def batch_select_indices(self, indices: torch.Tensor) -> None:
            if self.is_initialized:
                self._k, self._v = self._k.index_select(0, indices), self._v.index_select(0, indices)
                self.keys, self.values = self._k[:, :, :self.length], self._v[:, :, :self.length]

        def batch_repeat_interleave(self, repeats: int) -> None:
            if self.is_initialized:
                self._k, self._v = self._k.repeat_interleave(repeats, 0), self._v.repeat_interleave(repeats, 0)
                self.keys, self.values = self._k[:, :, :self.length], self._v[:, :, :self.length]

        def crop(self, tokens_to_remove: int) -> None:
            if tokens_to_remove > 0:
                raise ValueError(f"crop takes a negative count of positions to drop, got {tokens_to_remove}")
            self.length = max(0, self.length + tokens_to_remove)
            if self.is_initialized:
                self.keys, self.values = self._k[:, :, :self.length], self._v[:, :, :self.length]

        def reset(self) -> None:
            self.length = 0
            self._k = self._v = None
            super().reset()

    return BufferedLayer


def new_cache(capacity: int) -> Any:
    """An empty KV cache whose layers hold ``capacity`` positions without reallocating
    (transformers' ``DynamicCache`` with buffered layers; its plain form when this
    transformers has no layered cache)."""
    from transformers import DynamicCache

    cache = DynamicCache()
    layer = _buffered_layer_class()
    if layer is not None and getattr(cache, "layer_class_to_replicate", None) is not None and not cache.layers:
        cache.layer_class_to_replicate = lambda: layer(capacity)
    return cache


class _Forward:
    """``model(...)`` for one step, with the keywords the model takes (:func:`forward_keywords`)."""

    def __init__(self, model: Any) -> None:
        self.model = model
        keywords = forward_keywords(model)
        self.cache_kw = keywords.cache or "past_key_values"
        self.keep = keywords.logits_to_keep

    def __call__(self, ids: torch.Tensor, mask: torch.Tensor, pos: torch.Tensor, cache: Any,
                 last_only: bool) -> tuple[torch.Tensor, Any]:
        kwargs: dict[str, Any] = {"input_ids": ids, "attention_mask": mask, "position_ids": pos,
                                  self.cache_kw: cache, "use_cache": True}
        if last_only and self.keep:
            kwargs["logits_to_keep"] = 1
        out = self.model(**kwargs)
        new_cache = out.cache if getattr(out, "cache", None) is not None else out.past_key_values
        return out.logits[:, -1, :].float(), new_cache


def _choose(logits: torch.Tensor, temperature: float, top_p: float,
            generator: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """(token ids ``(B, 1)``, their behaviour log-probs ``(B, 1)``) for one step."""
    if temperature <= 0:
        token = logits.argmax(-1, keepdim=True)
        return token, logits.gather(-1, token) - torch.logsumexp(logits, -1, keepdim=True)
    scores = logits / temperature
    if top_p >= 1.0:
        return draw(scores, generator)
    values, index = nucleus_topk(scores, top_p)
    col, logp = draw(values, generator)
    return index.gather(-1, col), logp


def sample_rows(model: Any, prompts: Sequence[Sequence[int]], rows: Sequence[int], *, temperature: float,
                top_p: float, max_new: int, eos: int | None, pad: int, stops: Sequence[str],
                decode: Callable[[list[int]], str], generator: Any) -> list[Sampled]:
    """Continue ``prompts[rows[i]]`` for every ``i`` (rows of one prompt share its prefill).

    Args:
        prompts: Distinct prompts' token ids (each non-empty).
        rows: For each continuation, the index of its prompt.
        eos: End-of-sequence id (kept as the last token of a row that emits it).
        stops: Stop strings; a row whose decoded text contains one finishes (the caller cuts
            the text right after it).
        decode: Token ids -> text, for the stop-string check.
        generator: Random source (``None``: torch's default), or one per continuation (a list as
            long as ``rows``; ``None`` entries use torch's default), so rows of requests with
            different seeds batch together and each is reproducible from its own seed.
    """
    with torch.no_grad():
        return _sample(model, prompts, rows, temperature, top_p, max_new, eos, pad, stops, decode, generator)


def _sample(model: Any, prompts: Sequence[Sequence[int]], rows: Sequence[int], temperature: float, top_p: float,
            max_new: int, eos: int | None, pad: int, stops: Sequence[str], decode: Callable[[list[int]], str],
            generator: Any) -> list[Sampled]:
    per_row = generator is not None and not isinstance(generator, torch.Generator)
    if per_row and len(generator) != len(rows):
        raise ValueError(f"{len(generator)} generators for {len(rows)} rows")
    device = next(model.parameters()).device
    forward = _Forward(model)
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    mask = torch.zeros((len(prompts), width + max_new), dtype=torch.long)  # generated columns filled below
    for i, p in enumerate(prompts):
        ids[i, width - len(p):] = torch.tensor(list(p), dtype=torch.long)
        mask[i, width - len(p):width] = 1
    ids, mask = ids.to(device), mask.to(device)
    pos = (mask[:, :width].cumsum(-1) - 1).clamp(min=0)
    logits, cache = forward(ids, mask[:, :width], pos, new_cache(width + max_new), last_only=True)
    index = torch.tensor(list(rows), dtype=torch.long, device=device)
    if len(rows) != len(prompts) or list(rows) != list(range(len(prompts))):
        cache.batch_select_indices(index)
        logits = logits[index]
    mask = mask[index]
    mask[:, width:] = 1  # every generated position is attended to (a finished row leaves the batch)
    next_pos = mask[:, :width].sum(-1, keepdim=True)
    out = [Sampled() for _ in rows]
    live = list(range(len(rows)))  # output row of each batch row
    window = 4 * max((len(s) for s in stops if s), default=0) + 2  # tokens (>= 1 byte each) a new stop can span
    for step in range(max_new):
        token, logp = _choose(logits, temperature, top_p, [generator[r] for r in live] if per_row else generator)
        keep: list[int] = []
        for b, (r, t, lp) in enumerate(zip(live, token.squeeze(-1).tolist(), logp.squeeze(-1).tolist(), strict=True)):
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
        if len(keep) < len(live):  # compact: finished rows leave the cache, the mask and the batch
            sel = torch.tensor(keep, dtype=torch.long, device=device)
            cache.batch_select_indices(sel)
            token, mask, next_pos = token[sel], mask[sel], next_pos[sel]
            live = [live[b] for b in keep]
        logits, cache = forward(token, mask[:, :width + step + 1], next_pos, cache, last_only=False)
        next_pos = next_pos + 1
    return out
