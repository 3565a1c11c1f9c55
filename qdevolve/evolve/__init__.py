"""Evolution of programs: the engine and what it is built from, in sub-packages by job.

* :mod:`qdevolve.evolve.core`: the ask/tell engine (:class:`~qdevolve.evolve.core.Evolution`).
* :mod:`qdevolve.evolve.setup`: the run's inputs (config, example directory, trust, budgets).
* :mod:`qdevolve.evolve.training`: the training listener the engine calls; joined training.
* :mod:`qdevolve.evolve.report`: the run ledger, the progress display, the summary.
* :mod:`qdevolve.evolve.executors`: where evaluations run.
* :mod:`qdevolve.evolve.compat`: OpenEvolve's and ShinkaEvolve's formats.

Import from a sub-package's front door; this package re-exports nothing, so importing one
sub-package does not load the others. Their order is in ``docs/engine.md``.
"""

__all__: list[str] = []
