"""The evolution engine as ask/tell: :class:`Evolution` asks the breeder for children, has the
executor evaluate them and ``tell`` s each result as one unit of work (a :class:`TellRecord`
committed in one transaction, then applied to memory); the loop keeps model requests in
flight; :class:`EnginePlugins` are the archive, selection, operators and executor one run uses.

The top of :mod:`qdevolve.evolve`: it assembles a run from :mod:`~qdevolve.evolve.setup`,
:mod:`~qdevolve.evolve.executors`, :mod:`~qdevolve.evolve.training` (through the listener
protocol) and :mod:`~qdevolve.evolve.report`, and none of those imports it.
"""

from qdevolve.evolve.core.archive_rebuild import rebuild
from qdevolve.evolve.core.engine import Evolution, default_db_path
from qdevolve.evolve.core.hooks import (
           ChildObserver,
           DeadlineAware,
           DuplicateRewarding,
           StatefulBackend,
)
from qdevolve.evolve.core.plugins import EnginePlugins, RewardReporting
from qdevolve.evolve.core.record import TellRecord

__all__ = ["Evolution", "default_db_path", "EnginePlugins", "TellRecord", "rebuild",
           "StatefulBackend", "DeadlineAware", "ChildObserver", "DuplicateRewarding", "RewardReporting"]
