"""A difference of two means with a bootstrap interval, and what it lets one claim.

For draws ``a_1..a_n`` (one agent) and ``b_1..b_m`` (another, drawn independently) the
estimate is ``d = mean(a) - mean(b)``. Its interval at level ``L`` is the percentile
bootstrap: ``R`` times, resample ``a`` and ``b`` with replacement (each with its own size),
take the difference of the resampled means, and report the ``(1 - L) / 2`` and
``(1 + L) / 2`` quantiles of those ``R`` differences (Efron & Tibshirani 1993, *An
Introduction to the Bootstrap*, ch. 13). The resampling generator is seeded, so the same draws
give the same interval. With fewer than two draws on a side there is no interval.

For paired units (one per seed of a benchmark, each with draws of both sides) the estimate is
the mean over units of ``mean(a_u) - mean(b_u)`` and the interval is the two-stage bootstrap:
resample the units with replacement, then each chosen unit's draws within it (Davison & Hinkley
1997, *Bootstrap Methods and their Application*, sec. 3.8), so both the unit-to-unit spread
and the noise of each unit's draws widen it.

A difference is *within noise* when its interval contains 0 and *beyond noise* otherwise;
the claim "a beats b" holds only when the whole interval lies above 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Difference", "difference", "mean_interval", "paired_difference"]

LEVEL = 0.9
RESAMPLES = 4000


@dataclass(frozen=True)
class Difference:
    """``mean(a) - mean(b)`` with its interval (``lo``/``hi`` ``None`` without one)."""

    estimate: float
    lo: float | None
    hi: float | None
    n_a: int
    n_b: int
    level: float = LEVEL

    @property
    def has_interval(self) -> bool:
        return self.lo is not None and self.hi is not None

    @property
    def within_noise(self) -> bool | None:
        """Whether the interval contains 0 (``None`` without an interval)."""
        if self.lo is None or self.hi is None:
            return None
        return self.lo <= 0.0 <= self.hi

    @property
    def sign(self) -> int:
        """+1 when the interval lies above 0, -1 below, 0 when it contains 0 or is missing."""
        if self.lo is None or self.hi is None:
            return 0
        return 1 if self.lo > 0 else -1 if self.hi < 0 else 0

    def text(self, digits: int = 4) -> str:
        """``+0.0123, 90 % interval [-0.0050, +0.0290] over 6 and 6 draws: within noise``."""
        f = f"{{:+.{digits}f}}"
        counts = f"{self.n_a} draws each" if self.n_a == self.n_b else f"{self.n_a} and {self.n_b} draws"
        if self.lo is None or self.hi is None:
            return f"{f.format(self.estimate)} over {counts}: no interval (fewer than 2 draws)"
        word = "within noise" if self.within_noise else "beyond noise"
        return (f"{f.format(self.estimate)}, {round(100 * self.level)} % interval [{f.format(self.lo)}, "
                f"{f.format(self.hi)}] over {counts}: {word}")


def _quantiles(values: np.ndarray, level: float) -> tuple[float, float]:
    lo, hi = np.quantile(values, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def difference(a: Sequence[float], b: Sequence[float], *, level: float = LEVEL, resamples: int = RESAMPLES,
               seed: int = 0) -> Difference:
    """``mean(a) - mean(b)`` with its percentile-bootstrap interval (independent resampling).

    Raises:
        ValueError: a side has no draws, or ``level`` is not in (0, 1).
    """
    if not a or not b:
        raise ValueError(f"difference of means needs draws on both sides, got {len(a)} and {len(b)}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    estimate = float(xa.mean() - xb.mean())
    if len(xa) < 2 or len(xb) < 2:
        return Difference(estimate, None, None, len(xa), len(xb), level)
    rng = np.random.default_rng(seed)
    ra = xa[rng.integers(0, len(xa), size=(resamples, len(xa)))].mean(axis=1)
    rb = xb[rng.integers(0, len(xb), size=(resamples, len(xb)))].mean(axis=1)
    lo, hi = _quantiles(ra - rb, level)
    return Difference(estimate, lo, hi, len(xa), len(xb), level)


def mean_interval(a: Sequence[float], *, level: float = LEVEL, resamples: int = RESAMPLES,
                  seed: int = 0) -> tuple[float, float | None, float | None]:
    """``(mean(a), lo, hi)``: the mean with its percentile-bootstrap interval (``None`` bounds
    with fewer than two draws)."""
    if not a:
        raise ValueError("mean of no draws")
    x = np.asarray(a, dtype=float)
    if len(x) < 2:
        return float(x.mean()), None, None
    rng = np.random.default_rng(seed)
    lo, hi = _quantiles(x[rng.integers(0, len(x), size=(resamples, len(x)))].mean(axis=1), level)
    return float(x.mean()), lo, hi


def paired_difference(units: Sequence[tuple[Sequence[float], Sequence[float]]], *, level: float = LEVEL,
                      resamples: int = RESAMPLES, seed: int = 0) -> Difference:
    """Mean over units of ``mean(a_u) - mean(b_u)`` with its two-stage bootstrap interval (units
    resampled, then draws within each unit). ``n_a``/``n_b`` of the result count units.

    Raises:
        ValueError: no unit, or a unit with no draws on a side.
    """
    if not units or any(not a or not b for a, b in units):
        raise ValueError("a paired difference needs units with draws on both sides")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    arrays = [(np.asarray(a, dtype=float), np.asarray(b, dtype=float)) for a, b in units]
    estimate = float(np.mean([a.mean() - b.mean() for a, b in arrays]))
    n = len(arrays)
    if n < 2:
        return Difference(estimate, None, None, n, n, level)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, n, size=(resamples, n))
    out = np.zeros(resamples)
    for u, (a, b) in enumerate(arrays):  # each unit's resampled difference, used wherever it is picked
        da = a[rng.integers(0, len(a), size=(resamples, n, len(a)))].mean(axis=2)
        db = b[rng.integers(0, len(b), size=(resamples, n, len(b)))].mean(axis=2)
        out += ((picks == u) * (da - db)).sum(axis=1)
    lo, hi = _quantiles(out / n, level)
    return Difference(estimate, lo, hi, n, n, level)
