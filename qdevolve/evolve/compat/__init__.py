"""Other frameworks' formats read as qdevolve's: OpenEvolve's ``config.yaml`` and
ShinkaEvolve's example layout (``initial.<ext>`` + ``evaluate.py``).

Imports nothing else of :mod:`qdevolve.evolve`; :mod:`qdevolve.evolve.setup` calls it
when a config or an example directory is in one of these formats.
"""

from qdevolve.evolve.compat.openevolve_compat import map_openevolve
from qdevolve.evolve.compat.shinka_compat import (
    adapter_evaluator,
    is_shinka_evaluator,
    looks_like_shinka,
    map_shinka,
)

__all__ = ["map_openevolve", "map_shinka", "looks_like_shinka", "is_shinka_evaluator", "adapter_evaluator"]
