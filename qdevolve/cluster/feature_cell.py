"""Feature-cell clusterer: the child's own behaviour-descriptor cell (``feature_cell``).

Kind ``cluster``. The strategy key is the grid cell of the completion's *own* features
(``EvalResult.features``, e.g. ``length`` and ``multiplications`` of a program), computed
whether or not the archive admitted the child. This differs from ``archive_cell``, which
reads the archive's insertion event: a child that does not beat its cell's elite has no
event, so under ``archive_cell`` every such child falls into one shared ``cell:none``
cluster and Rare/IPS count unrelated strategies together.

For a feature ``f`` with a fixed range ``[lo, hi]`` and ``b`` bins the index is pyribs'
``GridArchive`` binning, the one ``map_elites`` uses::

    index_f = clip(floor((b (v_f - lo) + 1e-6) / (hi - lo)), 0, b - 1)

and a feature without a range keeps its value (rounded to ``decimals``): discrete
descriptors (counts, lengths) are their own cells. Running min/max ranges are deliberately
not offered, since a key must not change meaning as the run goes on. The features are read
from ``metadata["features"]`` (a name -> number mapping) of the rollout / pair / program.
Keys look like ``feat:length=5,multiplications=2`` (names sorted). A completion without
features (a failed program) gets ``missing`` (default ``"feat:none"``; ``None`` raises).

Settings: ``features`` (names to use; default every feature present, sorted), ``ranges``
(name -> ``[lo, hi]``), ``bins`` (one int or name -> int, for the ranged features),
``decimals``, ``missing``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from qdevolve import registry
from qdevolve.cluster import unpack

__all__ = ["FeatureCellCluster"]

_EPS = 1e-6


@registry.cluster("feature_cell")
class FeatureCellCluster:
    """Grid cell (or raw value) of each named feature of the completion (module docstring)."""

    def __init__(
        self,
        *,
        features: Sequence[str] | None = None,
        ranges: Mapping[str, Sequence[float]] | None = None,
        bins: int | Mapping[str, int] = 10,
        decimals: int = 6,
        missing: str | None = "feat:none",
    ) -> None:
        if isinstance(features, str):
            features = (features,)
        self.features = None if features is None else tuple(features)
        self.ranges: dict[str, tuple[float, float]] = {}
        for name, r in (ranges or {}).items():
            if len(r) != 2 or not float(r[0]) < float(r[1]):
                raise ValueError(f"feature_cell range for '{name}' must be [lo, hi] with lo < hi, got {r!r}")
            self.ranges[str(name)] = (float(r[0]), float(r[1]))
        if self.features is not None:
            unknown = sorted(set(self.ranges) - set(self.features))
            if unknown:
                raise ValueError(f"feature_cell ranges name feature(s) {unknown} not in features {list(self.features)}")
        if isinstance(bins, Mapping):
            self.bins = {str(k): int(v) for k, v in bins.items()}
            absent = sorted(set(self.ranges) - set(self.bins))
            if absent:
                raise ValueError(f"feature_cell bins has no entry for ranged feature(s) {absent}")
        else:
            self.bins = {name: int(bins) for name in self.ranges}
        if any(b < 1 for b in self.bins.values()):
            raise ValueError(f"feature_cell bins must be >= 1, got {self.bins}")
        self.decimals = int(decimals)
        self.missing = missing

    def cell(self, features: Mapping[str, Any]) -> dict[str, float | int]:
        """The per-feature cell coordinates of a feature mapping."""
        names = self.features if self.features is not None else tuple(sorted(features))
        out: dict[str, float | int] = {}
        for name in names:
            if name not in features:
                raise KeyError(name)
            v = float(features[name])
            if not math.isfinite(v):
                raise ValueError(f"feature_cell: feature '{name}' is not finite ({v})")
            if name in self.ranges:
                lo, hi = self.ranges[name]
                b = self.bins[name]
                out[name] = min(max(math.floor((b * (v - lo) + _EPS) / (hi - lo)), 0), b - 1)
            else:
                r = round(v, self.decimals) + 0.0
                out[name] = int(r) if r == int(r) else r
        return out

    def __call__(self, item: Any) -> str:
        inp = unpack(item)
        features = inp.metadata.get("features")
        try:
            if not isinstance(features, Mapping) or not features:
                raise KeyError("features")
            cell = self.cell(features)
        except KeyError as exc:
            if self.missing is None:
                raise ValueError(
                    f"feature_cell clusterer: no feature {exc} in metadata['features'] "
                    f"(have {sorted(features) if isinstance(features, Mapping) else 'none'})"
                ) from exc
            return self.missing
        return "feat:" + ",".join(f"{k}={v}" for k, v in sorted(cell.items()))
