"""A problem's best known value (``record:`` in ``config.yaml``) and how far a run is from it.

::

    record: {value: 2.939572, direction: max, source: "Friedman's table", metric: sum_radii}

``value`` is the best known value in the problem's own units; ``direction`` says whether
larger (``max``) or smaller (``min``) is better; ``source`` names where the figure comes
from; ``metric`` (optional) names the evaluator metric that holds the problem's value (the
score is used without it). The run summary then shows "best X, record Y (source), gap Z",
where the gap is how much the run's best must still improve (negative: the record is beaten).
"""

from __future__ import annotations

import math
from typing import Any

from qdevolve.errors import ConfigError

__all__ = ["RECORD_KEYS", "parse_record", "record_line"]

RECORD_KEYS = ("value", "direction", "source", "metric")


def parse_record(value: Any, *, where: str) -> dict[str, Any]:
    """Validate a ``record:`` mapping; errors name the file and the key."""
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: 'record' must be a mapping with keys {', '.join(RECORD_KEYS)}, "
                          f"got {type(value).__name__}")
    bad = sorted(set(value) - set(RECORD_KEYS))
    if bad:
        raise ConfigError(f"{where}: unknown key{'s' if len(bad) > 1 else ''} {', '.join(map(repr, bad))} "
                          f"at 'record'; known keys: {', '.join(RECORD_KEYS)}")
    for key in ("value", "direction", "source"):
        if key not in value:
            raise ConfigError(f"{where}: 'record.{key}' is required (record keys: {', '.join(RECORD_KEYS)})")
    v = value["value"]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ConfigError(f"{where}: 'record.value' must be a finite number, got {v!r}")
    if value["direction"] not in ("max", "min"):
        raise ConfigError(f"{where}: 'record.direction' must be 'max' or 'min', got {value['direction']!r}")
    for key in ("source", "metric"):
        if key in value and (not isinstance(value[key], str) or not value[key].strip()):
            raise ConfigError(f"{where}: 'record.{key}' must be a non-empty string, got {value[key]!r}")
    out = {"value": float(v), "direction": value["direction"], "source": value["source"].strip()}
    if value.get("metric"):
        out["metric"] = value["metric"].strip()
    return out


def record_line(record: dict[str, Any], best: float | None) -> str:
    """``best X, record Y (source), gap Z``; the gap is positive while the record stands."""
    head = f"record {record['value']:.10g} ({record['source']})"
    if best is None or not math.isfinite(best):
        return f"best -, {head}"
    gap = record["value"] - best if record["direction"] == "max" else best - record["value"]
    rel = f", {100 * gap / abs(record['value']):.3g}% of the record" if record["value"] else ""
    return f"best {best:.10g}, {head}, gap {gap:+.3g}{rel}"
