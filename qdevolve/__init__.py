"""qdevolve: quality-diversity self-evolution of programs.

An outer quality-diversity archive of programs and an inner diversity-preserving RL policy,
joined by one lineage database and one generation backend. ``run_evolution`` is the Python
API (see the README).
"""

from typing import TYPE_CHECKING, Any

from qdevolve.errors import ConfigError, DatabaseError, PluginError, QdevolveError

if TYPE_CHECKING:
    from qdevolve import registry
    from qdevolve.api import EvolutionResult, run_evolution
    from qdevolve.types import EvalResult, Program, Rollout

# Imported on first use, so the command line's read-only views start without the registry,
# the API and their dependencies.
_LAZY = {"registry": "qdevolve.registry", "run_evolution": "qdevolve.api", "EvolutionResult": "qdevolve.api",
         "Program": "qdevolve.types", "EvalResult": "qdevolve.types", "Rollout": "qdevolve.types"}

__all__ = [
    "registry",
    "run_evolution",
    "EvolutionResult",
    "Program",
    "EvalResult",
    "Rollout",
    "QdevolveError",
    "ConfigError",
    "DatabaseError",
    "PluginError",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'qdevolve' has no attribute {name!r}")
    import importlib

    mod = importlib.import_module(module)
    value = mod if name == "registry" else getattr(mod, name)
    globals()[name] = value
    return value
