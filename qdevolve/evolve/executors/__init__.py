"""Executors place evaluations: ``local`` (threads in the controller) and ``ray`` (a cluster).

An executor is a plugin kind (``registry.executor``). The engine's loop hands it one
:class:`EvalJob` per child and awaits the :class:`EvalOutcome`; the executor owns the
sandboxes (warm per worker slot), retries lost workers and says where each evaluation ran.
"""

from qdevolve.evolve.executors.base import EvalJob, EvalOutcome, Executor, WorkerLost

__all__ = ["EvalJob", "EvalOutcome", "Executor", "WorkerLost"]
