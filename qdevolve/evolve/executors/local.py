"""``local``: evaluations on a pool of threads in the controller, one warm sandbox per slot.

Each worker thread builds its own sandbox from the job's spec the first time it runs a job
and keeps it for the rest of the run (a sandbox may keep warm template processes; a slot
never shares one with another slot). The candidate still runs in the sandbox's own processes,
never in the controller. A sandbox that raises is a failed evaluation (status ``error``), not
a lost worker: the thread is still alive, so nothing is retried.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol, runtime_checkable

from qdevolve import registry
from qdevolve.evolve.executors.base import EvalJob, EvalOutcome
from qdevolve.types import EvalResult, Program

__all__ = ["LocalExecutor", "Sandbox", "make_sandbox"]


@runtime_checkable
class Sandbox(Protocol):
    """What the executor needs of a sandbox plugin."""

    def evaluate(self, program: Program, evaluator: Any, limits: Any = None, *,
                 cascade_thresholds: Any = None) -> EvalResult: ...


def make_sandbox(spec: dict[str, Any]) -> tuple[str, Sandbox]:
    """``(resolved type, sandbox)`` for a sandbox spec (``auto`` picks the best one here)."""
    from qdevolve.sandbox import resolve_sandbox

    spec = resolve_sandbox(spec)
    return spec["type"], registry.sandbox.create(spec)


@registry.executor("local")
class LocalExecutor:
    """Threads in the controller, each with its own warm sandbox.

    Args:
        slots: Evaluations at once (the run's ``workers``).
        sandbox: A ready sandbox for the first slot (e.g. the one that evaluated the seed);
            other slots build theirs from the job's spec.
    """

    name = "local"

    def __init__(self, *, slots: int = 1, sandbox: Sandbox | None = None) -> None:
        if int(slots) < 1:
            raise ValueError(f"slots must be >= 1, got {slots!r}")
        self.slots = int(slots)
        self._pool = ThreadPoolExecutor(max_workers=self.slots, thread_name_prefix="qdevolve-eval")
        self._spare = [sandbox] if sandbox is not None else []
        self._sandboxes: dict[int, Sandbox] = {}  # thread ident -> its sandbox
        self._lock = threading.Lock()

    def submit(self, job: EvalJob) -> Future[EvalOutcome]:
        return self._pool.submit(self._run, job)

    def _sandbox(self, job: EvalJob) -> Sandbox:
        me = threading.get_ident()
        with self._lock:
            box = self._sandboxes.get(me)
            if box is None:
                box = self._spare.pop() if self._spare else None
        if box is None:
            box = make_sandbox(job.sandbox)[1]
        with self._lock:
            self._sandboxes[me] = box
        return box

    def _run(self, job: EvalJob) -> EvalOutcome:
        worker = f"local:{threading.current_thread().name}"
        try:
            box = self._sandbox(job)
            result = box.evaluate(job.program, job.evaluator, job.limits, cascade_thresholds=job.cascade_thresholds)
        except Exception as exc:  # a sandbox bug must not lose the program
            result = EvalResult(status="error", error=f"sandbox failure: {type(exc).__name__}: {exc}")
        return EvalOutcome(result=result, worker=worker)

    def close(self) -> None:
        """Wait for running evaluations, then close every slot's sandbox."""
        self._pool.shutdown(wait=True)
        with self._lock:
            boxes = list(self._sandboxes.values()) + self._spare
            self._sandboxes, self._spare = {}, []
        for box in {id(b): b for b in boxes}.values():
            close = getattr(box, "close", None)  # optional in the sandbox protocol
            if close is not None:
                close()
