"""The keyword names a causal LM's ``forward`` takes, resolved once per model.

Transformers renamed the KV-cache argument (``past_key_values``, then ``cache`` in
transformers 5) and added ``logits_to_keep`` (logits for the last ``k`` positions only). A peft
wrapper's ``forward`` takes ``**kwargs`` and passes them on, so the names are read from the
wrapped model's signature. Every place that calls a model with a cache (the backend's sampler,
the trainer's sampling and scoring passes) resolves them here.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

__all__ = ["ForwardKeywords", "forward_keywords"]


@dataclass(frozen=True)
class ForwardKeywords:
    """``cache``: the KV-cache keyword (``None`` for a model without one); ``logits_to_keep``:
    whether the model takes ``logits_to_keep``."""

    cache: str | None
    logits_to_keep: bool


def forward_keywords(model: Any) -> ForwardKeywords:
    """The keywords ``model(...)`` takes (read from the wrapped model where ``model`` is a peft wrapper)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    try:
        params = inspect.signature(base.forward).parameters
    except (TypeError, ValueError):
        params = {}  # type: ignore[assignment]
    cache = "cache" if "cache" in params else "past_key_values" if "past_key_values" in params else None
    return ForwardKeywords(cache=cache, logits_to_keep="logits_to_keep" in params)
