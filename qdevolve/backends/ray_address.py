"""Finding and probing a Ray cluster's head: shared by the ``ray`` executor
(:mod:`qdevolve.evolve.executors.ray_executor`) and the Ray policy actor
(:mod:`qdevolve.backends.ray_policy`), so neither reaches into the other's private helpers."""

from __future__ import annotations

import os
import re
import socket

from qdevolve.errors import ConfigError, RunAborted

__all__ = ["resolve_address", "probe"]


def resolve_address(address: str) -> str:
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


def probe(host_port: str, timeout_s: float) -> str | None:
    """``None`` when a TCP connection to ``host_port`` opens within the timeout, else why not."""
    host, _, port = host_port.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return None
    except (OSError, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"
