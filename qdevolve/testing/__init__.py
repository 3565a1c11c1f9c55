"""Test helpers shipped with qdevolve: a scripted OpenAI-compatible server and its scripts."""

from qdevolve.testing.scripted_server import Reply, ScriptedServer
from qdevolve.testing.scripts import (
    GARBAGE_MODES,
    Cycle,
    FailFirst,
    GarbageScript,
    ScriptedModel,
    make_script,
)

__all__ = ["Reply", "ScriptedServer", "ScriptedModel", "GarbageScript", "FailFirst", "Cycle", "GARBAGE_MODES", "make_script"]
