"""What a run tells its user: the :class:`RunLedger` (every counter and the stop reason),
the progress display that reads only the ledger, and the end-of-run summary.

Uses :mod:`qdevolve.evolve.setup` (the best known value) and nothing above it; the engine
in :mod:`qdevolve.evolve.core` keeps a ledger and drives the display.
"""

from qdevolve.evolve.report.display import ProgressDisplay, print_summary
from qdevolve.evolve.report.front import front_table, front_tables
from qdevolve.evolve.report.ledger import RunLedger
from qdevolve.evolve.report.summary import RunSummary, TrainingSummary, summarize, training_summary

__all__ = ["RunLedger", "ProgressDisplay", "print_summary", "RunSummary", "TrainingSummary", "summarize",
           "training_summary", "front_table", "front_tables"]
