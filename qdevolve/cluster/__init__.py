"""Strategy clusterers (kind ``cluster``): map one completion to a strategy key string.

A clusterer is a callable ``clusterer(item) -> str``. ``item`` is one of:

* a :class:`qdevolve.types.Rollout` (its ``completion``, ``metadata`` and ``reward_vector``
  are read),
* a ``(completion_text, metadata)`` pair (``metadata`` a mapping, possibly empty),
* an object with ``code`` and ``metadata`` attributes (a :class:`qdevolve.types.Program`),
* a bare string (the completion text, no metadata).

Equal keys mean "same strategy": ``ips`` counts outcome keys and ``rare`` counts cluster
keys within a group. Built-ins (entry points, imported on first use): ``outcome``,
``ast_shape``, ``archive_cell``, ``embedding``, ``llm_judge``, and three keys that describe
the child's strategy whether or not the archive admits it: ``feature_cell`` (its own
behaviour-descriptor cell), ``semantic`` (its outputs on probe inputs) and ``ast_hash`` (its
normalised syntax tree)::

    from qdevolve import registry
    key = registry.cluster.create({"type": "ast_shape"})(rollout)

This package imports none of its plugin modules.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ClusterInput", "unpack", "stable_hash", "extract_code"]


@dataclass(frozen=True)
class ClusterInput:
    """What a clusterer sees of one completion."""

    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    reward_vector: tuple[float, ...] | None = None


def unpack(item: Any) -> ClusterInput:
    """Normalise a clusterer's argument (see the package docstring) to a :class:`ClusterInput`."""
    if isinstance(item, ClusterInput):
        return item
    if isinstance(item, str):
        return ClusterInput(item)
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
        meta = item[1] if item[1] is not None else {}
        if not isinstance(meta, Mapping):
            raise ValueError(
                f"a (text, metadata) pair needs a mapping as metadata, got {type(meta).__name__}"
            )
        return ClusterInput(item[0], meta)
    if hasattr(item, "completion") and hasattr(item, "metadata"):  # Rollout
        vec = getattr(item, "reward_vector", None)
        return ClusterInput(
            str(item.completion),
            dict(item.metadata or {}),
            None if vec is None else tuple(float(v) for v in vec),
        )
    if hasattr(item, "code") and hasattr(item, "metadata"):  # Program
        return ClusterInput(str(item.code), dict(item.metadata or {}))
    raise ValueError(
        "a clusterer takes a Rollout, a Program, a (completion text, metadata) pair or a string; "
        f"got {type(item).__name__}"
    )


def stable_hash(value: Any, length: int = 16) -> str:
    """A short SHA-256 of a JSON rendering of ``value`` (stable across processes)."""
    data = json.dumps(value, sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()[:length]


_FENCE = re.compile(r"```[ \t]*(?:[A-Za-z0-9_+-]*)[ \t]*\n(.*?)```", re.DOTALL)


def extract_code(text: str) -> str:
    """The first fenced code block of ``text`` (```` ```python ... ``` ````), else ``text``."""
    m = _FENCE.search(text)
    return m.group(1) if m else text
