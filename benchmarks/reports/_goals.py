"""Judge a goal stated in a raw file ("insert >= 20,000 programs/s") by rule, from the numbers.

A goal is a dict ``{"metric": name, "op": one of ">=", ">", "<=", "<", "value": threshold,
"unit": text}``, optionally with ``"applies_to": {field: value}`` (the row's own fields must
equal these: a goal stated for a 100,000-program run is not judged on a 2,000-program smoke run).

The values judged are one per unit (a repeat, or a seed); the estimate is their ``statistic``
(median over repeats unless told) with its percentile-bootstrap 90 % interval over the units
(``_raw.bootstrap_interval``). The goal **holds** when the estimate and the whole interval meet
it (the lower end for ``>=``/``>``, the upper end for ``<=``/``<``), **holds in the mean** when
only the estimate does (also when there is one unit, so no interval), and **does not hold**
otherwise.
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _raw import LEVEL, RESAMPLES, VERDICTS, Interval, _order_stat, bootstrap_interval  # noqa: E402

OPS: dict[str, Callable[[float, float], bool]] = {">=": operator.ge, ">": operator.gt, "<=": operator.le,
                                                   "<": operator.lt}
NOT_JUDGED = "not judged"


def goal_text(goal: dict[str, Any] | None) -> str:
    """``>= 20,000 programs/s``; ``-`` for no goal."""
    if not goal:
        return "-"
    v = goal["value"]
    num = f"{int(v):,}" if float(v).is_integer() else f"{v:g}"
    unit = goal.get("unit") or ""
    return f"{goal['op']} {num}{'' if unit in ('', 'x', '%') else ' '}{unit}"


def applies(goal: dict[str, Any], row: dict[str, Any]) -> bool:
    """Whether the row's fields match the sizes the goal was stated for."""
    return all(row.get(k) == v for k, v in (goal.get("applies_to") or {}).items())


def judge(interval: Interval, goal: dict[str, Any]) -> str:
    """``holds`` / ``holds in the mean`` / ``does not hold`` for ``goal`` (see the module docstring).

    Raises:
        ValueError: an unknown ``op``.
    """
    if goal["op"] not in OPS:
        raise ValueError(f"goal {goal!r}: op must be one of {', '.join(OPS)}")
    meets = OPS[goal["op"]]
    value = float(goal["value"])
    if not meets(interval.estimate, value):
        return VERDICTS[2]
    if interval.has_interval:
        bound = interval.lo if goal["op"] in (">=", ">") else interval.hi
        if meets(bound, value):  # type: ignore[arg-type]
            return VERDICTS[0]
    return VERDICTS[1]


def interval(values: Sequence[float], statistic: Callable[..., float] = np.median) -> Interval:
    """The statistic of the per-unit values (median by default) with its 90 % bootstrap interval:
    ``_raw.bootstrap_interval``'s, computed on all resamples at once for ``np.median`` and
    ``np.mean`` (the same generator, resamples and order statistics, so the same interval)."""
    x = np.asarray(list(values), dtype=float)
    if statistic not in (np.median, np.mean) or x.ndim != 1 or len(x) < 2 or not np.isfinite(x).all():
        return bootstrap_interval(x, statistic)
    idx = np.random.default_rng(0).integers(0, len(x), size=(RESAMPLES, len(x)))
    stats = np.sort(statistic(x[idx], axis=1))
    return Interval(float(statistic(x)), _order_stat(stats, (1 - LEVEL) / 2, upper=False),
                    _order_stat(stats, (1 + LEVEL) / 2, upper=True), LEVEL, len(x))


def span(iv: Interval, fmt: str, unit: str = "", units: str = "repeat") -> str:
    """``24,526 programs/s (16,192 to 25,003, 3 repeats)``: the estimate and its 90 % interval."""
    n = f"{iv.n_units} {units}{'s' * (iv.n_units != 1)}"
    u = f" {unit}" if unit else ""
    if not iv.has_interval:
        return f"{fmt.format(iv.estimate)}{u} ({n})"
    return f"{fmt.format(iv.estimate)}{u} ({fmt.format(iv.lo)} to {fmt.format(iv.hi)}, {n})"
