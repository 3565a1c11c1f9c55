"""Helpers of the ``ray`` executor: sizes, the head's address, futures set once.

Kept apart from :mod:`qdevolve.evolve.executors.ray_executor` so the executor module holds
only the dispatcher.
"""

from __future__ import annotations

import math
import os
import re
import socket
from concurrent.futures import Future
from typing import Any

from qdevolve.errors import ConfigError, RunAborted
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


def _resolve_address(address: str) -> str:
    """``HOST:PORT`` of the head; ``auto`` reads ``RAY_ADDRESS`` or the local cluster's file."""
    if address != "auto":
        if not re.match(r"^[^:\s]+:\d+$", address):
            raise ConfigError(f"executor_options.address: expected HOST:PORT, auto or ray://HOST:PORT, "
                              f"got {address!r}")
        return address
    env = os.environ.get("RAY_ADDRESS")
    if env:
        return env
    from ray._private.services import canonicalize_bootstrap_address  # no public equivalent

    try:
        found = canonicalize_bootstrap_address("auto")
    except Exception:
        found = None
    if not found:
        raise RunAborted("ray executor: no Ray cluster found on this machine (address 'auto'); "
                         "start one with 'ray start --head' or pass --ray-address HOST:PORT")
    return found


def _probe(host_port: str, timeout_s: float) -> str | None:
    """``None`` when a TCP connection to ``host_port`` opens within the timeout, else why not."""
    host, _, port = host_port.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return None
    except (OSError, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"


def _one_line(exc: object) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 300 else text[:297] + "..."
