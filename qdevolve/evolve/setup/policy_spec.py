"""``train.policy``: a built-in policy's name, a known model's name (``qdevolve models``), or a
path that looks like one (never a guess).

A value is a *path* only when it looks like one: it contains a ``/`` (or the platform's
separator) or starts with ``.`` or ``~``; ``vllm:PATH`` names a path the same way. Any other
value is a *name*, and the only names are the built-in policies (:data:`BUILTIN_POLICIES`).
So ``tiny`` is the tiny base policy even where the working directory holds a ``tiny``
folder (a warning says how to name the folder: ``./tiny``), and ``mymodel`` is an error that
says to write ``./mymodel``: whether a folder happens to exist never decides what loads.
"""

from __future__ import annotations

import os
from pathlib import Path

from qdevolve.errors import ConfigError

__all__ = ["BUILTIN_POLICIES", "looks_like_path", "policy_path", "policy_warnings"]

BUILTIN_POLICIES = frozenset({"tiny"})


def looks_like_path(text: str) -> bool:
    """True when ``text`` is written as a path: a separator inside, or a leading ``.`` or ``~``."""
    return "/" in text or os.sep in text or text.startswith((".", "~"))


def policy_path(spec: str, where: str = "train.policy") -> str | None:
    """The directory ``spec`` names, or ``None`` for a built-in policy.

    Raises:
        ConfigError: ``spec`` is neither a built-in name nor written as a path.
    """
    text = spec.split(":", 1)[1] if spec.startswith("vllm:") else spec
    if not spec.startswith("vllm:") and spec in BUILTIN_POLICIES:
        return None
    if looks_like_path(text):
        return text
    from qdevolve.backends.models import KNOWN_MODELS

    if text in KNOWN_MODELS:  # a model qdevolve prepares from its package (qdevolve models)
        return text
    raise ConfigError(f"{where}: {spec!r} is neither a built-in policy ({', '.join(sorted(BUILTIN_POLICIES))}), "
                      f"a known model ({', '.join(sorted(KNOWN_MODELS))}) "
                      f"nor a path; write a model directory as a path, e.g. "
                      f"{'vllm:./' + text if spec.startswith('vllm:') else './' + text}")


def policy_warnings(spec: str | None, where: str = "train.policy") -> list[str]:
    """A warning when a built-in name is also the name of a folder in the working directory."""
    if isinstance(spec, str) and spec in BUILTIN_POLICIES and Path(spec).exists():
        return [f"{where}: {spec!r} is the built-in {spec} base policy, not the folder ./{spec} in the "
                f"working directory; to load that folder write ./{spec}"]
    return []
