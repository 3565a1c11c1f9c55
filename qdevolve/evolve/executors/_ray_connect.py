"""Helpers of the ``ray`` executor: sizes, the head's address, futures set once.

Kept apart from :mod:`qdevolve.evolve.executors.ray_executor` so the executor module holds
only the dispatcher.
"""

from __future__ import annotations

import math
import re
from concurrent.futures import Future
from typing import Any

from qdevolve.errors import ConfigError
from qdevolve.evolve.executors.base import EvalOutcome

__all__ = ["parse_memory"]

_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "kib": 2**10, "m": 10**6, "mb": 10**6,
          "mib": 2**20, "g": 10**9, "gb": 10**9, "gib": 2**30, "t": 10**12, "tb": 10**12, "tib": 2**40}
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*$")


def parse_memory(value: int | float | str | None, *, field_name: str = "memory") -> int | None:
    """Bytes from ``2147483648``, ``"2GiB"``, ``"512MB"`` or ``"1.5G"`` (``None`` stays ``None``)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ConfigError(f"executor_options.{field_name}: expected bytes or a size like '2GiB', got {value!r}")
    if isinstance(value, (int, float)):
        n = float(value)
    else:
        m = _SIZE.match(str(value))
        unit = m.group(2).lower() if m else None
        if m is None or unit not in _UNITS:
            raise ConfigError(f"executor_options.{field_name}: cannot read {value!r} as a size; "
                              f"write bytes or e.g. '512MiB', '2GiB'")
        n = float(m.group(1)) * _UNITS[unit]
    if not math.isfinite(n) or n <= 0:
        raise ConfigError(f"executor_options.{field_name}: must be a positive size, got {value!r}")
    return int(n)


def _set(fut: Future[EvalOutcome], *, result: EvalOutcome | None = None,
         exc: BaseException | None = None) -> None:
    """Resolve ``fut`` once; a future already done (cancelled) is left as it is."""
    if fut.done():
        return
    if exc is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(result)  # type: ignore[arg-type]


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ConfigError("executor 'ray' needs the ray package: pip install 'qdevolve[ray]'") from exc
    return ray


def _one_line(exc: object) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 300 else text[:297] + "..."
