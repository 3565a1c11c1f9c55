"""The executor protocol: ``submit(job) -> Future[EvalOutcome]``, ``close()``.

Contract (every executor, tested for ``local`` and ``ray``):

* ``submit`` never runs candidate code in the controller; it returns at once.
* The future resolves to an :class:`EvalOutcome` whose ``worker`` names where the evaluation
  ran (``local:<thread or worker id>``, ``ray:<node id>:<pid>``).
* A worker that dies mid-evaluation is retried on another worker up to ``max_retries``
  times; the program still gets exactly one outcome. When retries are exhausted, or the
  cluster is gone, the future raises :class:`WorkerLost` (the engine stops the run, resumable).
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from qdevolve.types import EvalResult, Program

__all__ = ["EvalJob", "EvalOutcome", "Executor", "WorkerLost"]


@dataclass(frozen=True)
class EvalJob:
    """One evaluation to place.

    Attributes:
        program: The candidate (its code travels with the job).
        evaluator: Path of the evaluator file (its text travels with the job to remote workers).
        limits: The sandbox limits (a ``SandboxLimits``) for this evaluation.
        sandbox: Registry spec of the sandbox each worker builds (``{"type": "bwrap", ...}``).
        plugin_files: ``--plugin`` files the worker must load before building the sandbox.
        cascade_thresholds: The evaluator's cascade thresholds (``evaluator.cascade_thresholds``).
    """

    program: Program
    evaluator: Path
    limits: Any
    sandbox: dict[str, Any]
    plugin_files: tuple[Path, ...] = field(default_factory=tuple)
    cascade_thresholds: tuple[float, ...] | None = None


@dataclass(frozen=True)
class EvalOutcome:
    """What came back: the result and where it ran (``evaluations.worker``)."""

    result: EvalResult
    worker: str
    attempts: int = 1


class WorkerLost(RuntimeError):
    """Every retry of a job lost its worker, or the cluster went away."""


@runtime_checkable
class Executor(Protocol):
    """Places evaluations; see the module docstring for the contract."""

    name: str
    slots: int  # how many evaluations it can run at once (the loop keeps this many in flight)

    def submit(self, job: EvalJob) -> Future[EvalOutcome]: ...

    def close(self) -> None: ...
