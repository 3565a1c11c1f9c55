"""Choosing a model per request: a weighted ensemble, optionally a UCB1 bandit.

*Weighted ensemble* (AlphaEvolve's fast+strong mix, OpenEvolve's ``llm.models[].weight``):
model ``i`` is drawn with probability ``w_i / sum_j w_j``.

*UCB1 bandit* (Auer, Cesa-Bianchi & Fischer 2002, "Finite-time analysis of the multiarmed
bandit problem"; ShinkaEvolve uses a UCB variant over LLMs): every model is tried once, then
the model maximising

    mean_i + c * sqrt(2 ln N / n_i)

is chosen, where ``mean_i`` is the average reward reported for model ``i`` (the engine
reports the child's improvement over its parent), ``n_i`` how often it was rewarded and
``N = sum_i n_i``. Ties go to the larger weight. Rewards are not clipped; scale ``c`` to the
spread of your rewards (UCB1's guarantee assumes rewards in [0, 1]).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

from qdevolve.errors import QdevolveError

__all__ = ["ModelSpec", "ModelChooser", "parse_models"]

_MODEL_KEYS = ("name", "weight", "api_base", "api_key_env", "temperature", "top_p", "max_tokens")


@dataclass
class ModelSpec:
    """One model of an ensemble and its per-model overrides (``None`` = backend default)."""

    name: str
    weight: float = 1.0
    api_base: str | None = None
    api_key_env: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None


def parse_models(model: str | None, models: list[dict[str, Any]] | list[str] | None) -> list[ModelSpec]:
    """The ensemble from ``model=`` or ``models=[{"name":..., "weight":...}]``.

    Raises:
        ValueError: neither or both given, an unknown key, or a non-positive total weight.
    """
    if (model is None) == (not models):
        raise ValueError("give exactly one of model='name' or models=[{'name': ..., 'weight': ...}]")
    if model is not None:
        return [ModelSpec(name=model)]
    specs = []
    for i, m in enumerate(models or []):
        if isinstance(m, str):
            m = {"name": m}
        unknown = sorted(set(m) - set(_MODEL_KEYS))
        if unknown or "name" not in m:
            raise ValueError(
                f"models[{i}] must have 'name' and only keys {', '.join(_MODEL_KEYS)}; "
                f"got {sorted(m)}"
            )
        spec = ModelSpec(**m)
        if spec.weight < 0 or not math.isfinite(spec.weight):
            raise ValueError(f"models[{i}] ('{spec.name}') has weight {spec.weight}; use a weight >= 0")
        specs.append(spec)
    if sum(s.weight for s in specs) <= 0:
        raise ValueError("the model weights sum to 0; give at least one model a positive weight")
    return specs


@dataclass
class ModelChooser:
    """Picks a model per request: weighted draw, or UCB1 when ``bandit`` is on."""

    specs: list[ModelSpec]
    bandit: bool = False
    exploration: float = 1.0
    seed: int | None = None
    counts: dict[str, int] = field(default_factory=dict)
    sums: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._by_name = {s.name: s for s in self.specs}

    def pick(self) -> ModelSpec:
        """The model for the next request."""
        if len(self.specs) == 1:
            return self.specs[0]
        if not self.bandit:
            return self._rng.choices(self.specs, weights=[s.weight for s in self.specs])[0]
        live = [s for s in self.specs if s.weight > 0]
        untried = [s for s in live if self.counts.get(s.name, 0) == 0]
        if untried:
            return untried[0]
        total = sum(self.counts[s.name] for s in live)

        def ucb(s: ModelSpec) -> tuple[float, float]:
            n = self.counts[s.name]
            return (self.sums[s.name] / n + self.exploration * math.sqrt(2.0 * math.log(total) / n), s.weight)

        return max(live, key=ucb)

    def report(self, model: str, reward: float) -> None:
        """Credit ``reward`` (e.g. child score minus parent score) to ``model``."""
        if model not in self._by_name:
            raise ValueError(f"unknown model {model!r}; ensemble models are {sorted(self._by_name)}")
        if reward is None or not math.isfinite(float(reward)):
            return
        self.counts[model] = self.counts.get(model, 0) + 1
        self.sums[model] = self.sums.get(model, 0.0) + float(reward)

    def state(self) -> dict[str, Any]:
        """Bandit statistics and the draw RNG, JSON-safe (the engine stores it with the run).

        Restoring it with :meth:`restore` makes the next choices those an uninterrupted
        chooser with the same seed would make.
        """
        version, internal, gauss = self._rng.getstate()
        return {"counts": dict(self.counts), "sums": dict(self.sums),
                "rng": [version, list(internal), gauss]}

    def restore(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state` output; statistics of models no longer configured are dropped.

        Raises:
            QdevolveError: ``state`` is malformed (the message names the field).
        """
        if not isinstance(state, dict):
            raise QdevolveError(f"ensemble state is {type(state).__name__}, not an object")
        counts, sums = state.get("counts", {}), state.get("sums", {})
        if not isinstance(counts, dict) or not isinstance(sums, dict):
            raise QdevolveError("ensemble state: 'counts' and 'sums' must be objects")
        new_counts: dict[str, int] = {}
        new_sums: dict[str, float] = {}
        for name, v in counts.items():
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise QdevolveError(f"ensemble state: counts[{name!r}] = {v!r} is not a count >= 0")
            if name in self._by_name:
                new_counts[name] = v
        for name, v in sums.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise QdevolveError(f"ensemble state: sums[{name!r}] = {v!r} is not a finite number")
            if name in self._by_name:
                new_sums[name] = float(v)
        if set(new_counts) != set(new_sums):
            raise QdevolveError("ensemble state: 'counts' and 'sums' name different models")
        rng = state.get("rng")
        if rng is not None:
            try:
                version, internal, gauss = rng
                self._rng.setstate((int(version), tuple(int(x) for x in internal), gauss))
            except (TypeError, ValueError) as exc:
                raise QdevolveError(f"ensemble state: 'rng' is not a random.Random state ({exc})") from None
        self.counts, self.sums = new_counts, new_sums
