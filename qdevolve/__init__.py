"""qdevolve: quality-diversity self-evolution of programs.

An outer quality-diversity archive of programs and an inner diversity-preserving RL policy,
joined by one lineage database and one generation backend. ``run_evolution`` is the Python
API (see the README).
"""

from qdevolve import registry
from qdevolve.api import EvolutionResult, run_evolution
from qdevolve.errors import ConfigError, DatabaseError, PluginError, QdevolveError
from qdevolve.types import EvalResult, Program, Rollout

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
