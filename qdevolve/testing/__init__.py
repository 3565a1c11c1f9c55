"""Test helpers shipped with qdevolve: a scripted OpenAI-compatible server and its scripts.

Names are imported on first use, so ``python -m qdevolve.testing.scripted_server`` runs
without importing the module twice.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["Reply", "ScriptedServer", "ScriptedModel", "GarbageScript", "FailFirst", "Cycle", "GARBAGE_MODES", "make_script",
           "HostileScript", "HOSTILE_MODES"]

_WHERE = {
    "Reply": "scripted_server",
    "ScriptedServer": "scripted_server",
    "ScriptedModel": "scripts",
    "GarbageScript": "scripts",
    "FailFirst": "scripts",
    "Cycle": "scripts",
    "GARBAGE_MODES": "scripts",
    "make_script": "scripts",
    "HostileScript": "hostile",
    "HOSTILE_MODES": "hostile",
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'qdevolve.testing' has no attribute {name!r}")
    return getattr(importlib.import_module(f"qdevolve.testing.{_WHERE[name]}"), name)
