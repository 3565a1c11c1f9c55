"""qdevolve: quality-diversity self-evolution of programs.

An outer quality-diversity archive of programs and an inner diversity-preserving RL policy,
joined by one lineage database and one generation backend. See ``ARCHITECTURE.md``.
"""

from qdevolve import registry
from qdevolve.errors import ConfigError, DatabaseError, PluginError, QdevolveError
from qdevolve.types import EvalResult, Program, Rollout

__all__ = [
    "registry",
    "Program",
    "EvalResult",
    "Rollout",
    "QdevolveError",
    "ConfigError",
    "DatabaseError",
    "PluginError",
]
__version__ = "0.1.0"
