"""Outcome clusterer: a hash of what a completion *does* (kind ``cluster``, name ``outcome``).

The key is a hash of the first behaviour record found, in this order:

1. ``metadata["outcome_key"]`` - an outcome key the task already computed (used verbatim);
2. ``metadata[f]`` for ``f`` in ``fields`` (default ``outputs``, ``semantic_key``, ``tests``):
   output values on probe inputs, a semantic fingerprint, the per-test pass vector;
3. the rollout's ``reward_vector`` (per-test results);
4. the completion text itself, stripped (``fallback="text"``: for answer tasks the answer is
   the outcome), or a ``ValueError`` (``fallback="error"``).

Floats are rounded to ``decimals`` places first so that numerically equal behaviour hashes
equally. Keys look like ``out:<16 hex>``. This is the outcome identity IPS-GRPO counts
(diversity-rl.md §3: a semantic fingerprint is the strongest key for programs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from qdevolve import registry
from qdevolve.cluster import stable_hash, unpack

__all__ = ["OutcomeCluster"]

_FALLBACKS = ("text", "error")


def _rounded(value: Any, decimals: int | None) -> Any:
    if isinstance(value, bool) or decimals is None:
        return value
    if isinstance(value, float):
        return round(value, decimals) + 0.0  # -0.0 -> 0.0
    if isinstance(value, Mapping):
        return {str(k): _rounded(v, decimals) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [_rounded(v, decimals) for v in value]
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return _rounded(value.tolist(), decimals)
    return value


@registry.cluster("outcome")
class OutcomeCluster:
    """Hash of output behaviour (see module docstring)."""

    def __init__(
        self,
        *,
        fields: Sequence[str] = ("outputs", "semantic_key", "tests"),
        decimals: int | None = 6,
        fallback: str = "text",
    ) -> None:
        if isinstance(fields, str):
            fields = (fields,)
        self.fields = tuple(fields)
        self.decimals = decimals
        if fallback not in _FALLBACKS:
            raise ValueError(f"fallback must be one of {', '.join(_FALLBACKS)}, got {fallback!r}")
        self.fallback = fallback

    def __call__(self, item: Any) -> str:
        inp = unpack(item)
        if inp.metadata.get("outcome_key") is not None:
            return str(inp.metadata["outcome_key"])
        for f in self.fields:
            if inp.metadata.get(f) is not None:
                return "out:" + stable_hash([f, _rounded(inp.metadata[f], self.decimals)])
        if inp.reward_vector is not None:
            return "out:" + stable_hash(["tests", _rounded(list(inp.reward_vector), self.decimals)])
        if self.fallback == "error":
            raise ValueError(
                "outcome clusterer found no behaviour record: set metadata['outcome_key'] or one of "
                f"metadata{list(self.fields)}, or a reward_vector (or use fallback='text')"
            )
        return "out:" + stable_hash(["text", inp.text.strip()])
