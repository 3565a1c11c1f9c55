"""The ``ray`` executor: evaluations on a Ray cluster, one warm sandbox per worker slot.

Connects to a running cluster (``ray start --head`` on one machine, ``ray start --address
HEAD:PORT`` on the others) and places one actor per worker slot; each actor reserves the
resources of one evaluation (``num_cpus``, ``num_gpus``, ``memory`` and custom resources
such as ``docker: 1`` for nodes that run Docker) and keeps its sandbox warm between
evaluations. The controller stays one process: a dispatcher thread hands each job to an idle
actor, together with the evaluator and ``--plugin`` files the first time that actor needs
them, and resolves the job's future when the result comes back::

    from qdevolve import registry

    ex = registry.executor.create({"type": "ray", "address": "10.0.0.5:6379",
                                   "num_cpus": 1, "resources": {"docker": 1}})
    outcome = ex.submit(EvalJob(program, evaluator, limits, {"type": "docker"})).result()
    outcome.worker  # 'ray:<node id>:<pid>'

Faults: an actor whose process or node dies mid-evaluation is replaced and the job is
retried on another actor, at most ``max_retries`` times; the job's future is set exactly
once. When the retries are spent, when no actor can be placed for ``placement_timeout_s``,
or when the cluster's control store (GCS) stops answering, futures raise
:class:`~qdevolve.evolve.executors.base.WorkerLost` and the engine stops the run, resumable.
"""

from __future__ import annotations

import collections
import hashlib
import logging
import math
import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qdevolve import registry
from qdevolve.backends.ray_address import probe, resolve_address
from qdevolve.errors import ConfigError, EvaluationSetupError, RunAborted
from qdevolve.evolve.executors._ray_connect import (
    _import_ray,
    _one_line,
    _set,
    parse_memory,
)
from qdevolve.evolve.executors._ray_worker import FileBlob, SandboxWorker
from qdevolve.evolve.executors.base import EvalJob, EvalOutcome, WorkerLost

__all__ = ["RayExecutor", "parse_memory"]

log = logging.getLogger("qdevolve.executor.ray")

_TICK_S = 1.0  # how often the dispatcher checks placement deadlines when nothing happens


@dataclass
class _Task:
    """One submitted job and its single future."""

    job: EvalJob
    future: Future[EvalOutcome]
    attempts: int = 0                              # evaluations started for it
    lost: list[str] = field(default_factory=list)  # workers that died running it


@dataclass
class _Slot:
    """One actor (a worker slot) as the dispatcher sees it."""

    handle: Any
    spawned: float                                 # time.monotonic() at creation
    worker: str | None = None                      # 'ray:<node>:<pid>' once placed
    known: set[str] = field(default_factory=set)   # file hashes this actor already holds
    task: _Task | None = None                      # what it is evaluating


@registry.executor("ray")
class RayExecutor:
    """Evaluations on a Ray cluster (see the module docstring).

    Args:
        address: ``HOST:PORT`` of the cluster's head (the ``--port`` of ``ray start --head``),
            ``auto`` (``RAY_ADDRESS``, else the cluster started on this machine) or a
            ``ray://HOST:10001`` Ray Client address.
        workers: Worker slots (actors); default: ``slots``, else as many as the cluster's
            resources fit.
        slots: The run's ``workers`` (the engine passes it); ``workers`` overrides it.
        num_cpus: CPUs reserved per evaluation.
        num_gpus: GPUs reserved per evaluation.
        memory: Memory reserved per evaluation (bytes or ``"2GiB"``); Ray schedules by it, the
            sandbox's ``memory_mb`` limit enforces it.
        resources: Custom resources per evaluation, e.g. ``{"docker": 1}`` to run only on
            nodes started with ``ray start --resources '{"docker": 4}'``.
        max_retries: How many times a job whose worker died is started again elsewhere.
        placement_timeout_s: How long to wait for an actor to be placed when none is alive.
        connect_timeout_s: How long to wait for the head to answer before giving up.
        runtime_env: Ray runtime environment for the actors (e.g. ``{"env_vars": {...}}``).
        namespace: Ray namespace of the actors.

    Raises:
        ConfigError: a bad option, or ``ray`` is not installed.
        RunAborted: the cluster cannot be reached, or fits no evaluation.
    """

    name = "ray"

    def __init__(self, *, address: str = "auto", workers: int | None = None, num_cpus: float = 1.0,
                 num_gpus: float = 0.0, memory: int | str | None = None,
                 resources: dict[str, float] | None = None, max_retries: int = 2,
                 placement_timeout_s: float = 120.0, connect_timeout_s: float = 15.0,
                 runtime_env: dict[str, Any] | None = None, namespace: str | None = None,
                 slots: int | None = None) -> None:
        if workers is None:
            workers = slots
        if max_retries < 0:
            raise ConfigError(f"executor_options.max_retries: must be >= 0, got {max_retries}")
        if workers is not None and workers < 1:
            raise ConfigError(f"executor_options.workers: must be >= 1, got {workers}")
        if num_cpus < 0 or num_gpus < 0:
            raise ConfigError("executor_options.num_cpus/num_gpus: must be >= 0")
        self.address = address
        self.max_retries = int(max_retries)
        self.placement_timeout_s = float(placement_timeout_s)
        self.request = {k: float(v) for k, v in {"CPU": num_cpus, "GPU": num_gpus,
                                                   **(resources or {})}.items() if v}
        mem = parse_memory(memory)
        if mem:
            self.request["memory"] = float(mem)
        self._ray = _import_ray()
        self._owns_ray = False
        self.gcs_address = self._connect(address, connect_timeout_s, runtime_env, namespace)
        self.slots = self._fit(workers)
        self._actor_cls = self._ray.remote(SandboxWorker).options(
            num_cpus=num_cpus, num_gpus=num_gpus or None, memory=mem,
            resources=resources or None, max_restarts=0, max_task_retries=0,
            max_concurrency=1, scheduling_strategy="SPREAD")
        # dispatcher state: touched only by the dispatcher thread after start
        self._events: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self._queue: collections.deque[_Task] = collections.deque()  # waiting for a slot
        self._idle: list[_Slot] = []
        self._starting: list[_Slot] = []
        self._busy: list[_Slot] = []
        self._files: dict[tuple[str, int, int], tuple[str, FileBlob]] = {}  # (path, mtime, size)
        self._broken: str | None = None  # set once: every later submit fails with it
        self._start_failures = 0  # actors that failed to start since the last one that did
        self._closed = False
        for _ in range(self.slots):
            self._spawn()
        self._thread = threading.Thread(target=self._loop, name="qdevolve-ray-dispatch", daemon=True)
        self._thread.start()

    # -- public -------------------------------------------------------------------------
    def submit(self, job: EvalJob) -> Future[EvalOutcome]:
        """Queue ``job``; returns at once. The future resolves to an :class:`EvalOutcome`."""
        fut: Future[EvalOutcome] = Future()
        if self._closed:
            raise RuntimeError("ray executor is closed")
        if self._broken:
            fut.set_exception(WorkerLost(self._broken))
            return fut
        self._events.put(("submit", _Task(job, fut)))
        return fut

    def workers(self) -> list[str]:
        """Identities (``ray:<node>:<pid>``) of the actors placed so far and still alive."""
        return [s.worker for s in (*self._idle, *self._busy) if s.worker]

    def close(self) -> None:
        """Stop dispatching, cancel waiting jobs, shut the actors down (their files removed)."""
        if self._closed:
            return
        self._closed = True
        self._events.put(("close",))
        self._thread.join(timeout=30)
        slots = [*self._idle, *self._busy, *self._starting]
        for task in [*self._queue, *(s.task for s in self._busy if s.task)]:
            task.future.cancel()
        if not self._broken:
            refs = [s.handle.shutdown.remote() for s in slots]
            try:
                self._ray.wait(refs, num_returns=len(refs), timeout=10)
            except Exception:  # the cluster may be gone; nothing left to clean there
                pass
        for s in slots:
            try:
                self._ray.kill(s.handle, no_restart=True)
            except Exception:
                pass
        if self._owns_ray:
            self._ray.shutdown()

    # -- connection ----------------------------------------------------------------------
    def _connect(self, address: str, timeout_s: float, runtime_env: dict[str, Any] | None,
                 namespace: str | None) -> str | None:
        ray = self._ray
        if ray.is_initialized():
            return ray.get_runtime_context().gcs_address
        target = address
        if not address.startswith("ray://"):
            target = resolve_address(address)
            why = probe(target, timeout_s)
            if why:
                raise RunAborted(f"ray executor: cannot reach the Ray cluster at {target} ({why}); "
                                 f"start it with 'ray start --head --port PORT' or pass "
                                 f"--ray-address HOST:PORT")
        try:
            ray.init(address=target, namespace=namespace, runtime_env=runtime_env,
                     logging_level=logging.ERROR, log_to_driver=False, configure_logging=False)
        except Exception as exc:
            raise RunAborted(f"ray executor: connecting to {target} failed: "
                             f"{type(exc).__name__}: {_one_line(exc)}") from exc
        self._owns_ray = True
        return None if target.startswith("ray://") else ray.get_runtime_context().gcs_address

    def _fit(self, workers: int | None) -> int:
        total = self._ray.cluster_resources()
        fits = [math.floor(total.get(k, 0.0) / v + 1e-9) for k, v in self.request.items()]
        fit = min(fits) if fits else len(self._ray.nodes())
        have = ", ".join(f"{k}={v:g}" for k, v in sorted(total.items())
                         if not k.startswith(("node:", "object_store")))
        if fit < 1:
            need = ", ".join(f"{k}={v:g}" for k, v in self.request.items())
            raise RunAborted(f"ray executor: no node of the cluster at {self.address} can run an "
                             f"evaluation needing {need} (the cluster has {have}); lower "
                             f"executor_options or add nodes with 'ray start --resources'")
        if workers is not None and workers > fit:
            log.warning("ray executor: %d workers requested but the cluster fits %d (%s); the "
                        "rest wait for resources", workers, fit, have)
        return workers or fit

    def _gcs_alive(self) -> bool:
        if self.gcs_address is None:
            return True  # Ray Client: its own errors say when the server is gone
        return probe(self.gcs_address, 3.0) is None

    # -- the dispatcher thread -------------------------------------------------------------
    def _spawn(self) -> None:
        slot = _Slot(handle=self._actor_cls.remote(), spawned=time.monotonic())
        ref = slot.handle.identity.remote()
        self._starting.append(slot)
        ref.future().add_done_callback(lambda _f: self._events.put(("ready", slot, ref)))

    def _loop(self) -> None:
        while True:
            try:
                event = self._events.get(timeout=_TICK_S)
            except queue.Empty:
                event = None
            try:
                if event is not None:
                    if event[0] == "close":
                        return
                    self._handle(event)
                self._check_placement()
                self._dispatch()
            except Exception as exc:  # never leave futures hanging on a dispatcher bug
                log.exception("ray executor: dispatcher failed")
                self._fail_all(f"ray executor: internal error: {type(exc).__name__}: {_one_line(exc)}")
                return

    def _handle(self, event: tuple[Any, ...]) -> None:
        kind = event[0]
        if kind == "submit":
            if self._broken:
                _set(event[1].future, exc=WorkerLost(self._broken))
            else:
                self._queue.append(event[1])
        elif kind == "ready":
            self._on_ready(event[1], event[2])
        elif kind == "done":
            self._on_done(event[1], event[2])

    def _on_ready(self, slot: _Slot, ref: Any) -> None:
        if slot not in self._starting:
            return
        self._starting.remove(slot)
        try:
            slot.worker = self._ray.get(ref)
        except Exception as exc:
            log.warning("ray executor: a worker failed to start: %s", _one_line(exc))
            self._start_failures += 1
            if not self._gcs_alive():
                self._fail_all(self._gone(exc))
            elif self._start_failures > 2 * self.slots + 2 and not (self._idle or self._busy):
                self._fail_all(f"ray executor: workers fail to start on the cluster at "
                               f"{self.address} ({type(exc).__name__}: {_one_line(exc)}); is "
                               f"qdevolve installed on every node?")
            else:
                self._spawn()
            return
        self._start_failures = 0
        self._idle.append(slot)

    def _on_done(self, slot: _Slot, ref: Any) -> None:
        task = slot.task
        if task is None or slot not in self._busy:
            return
        exc_types = self._ray.exceptions
        try:
            result, worker = self._ray.get(ref)
        except exc_types.RayTaskError as exc:  # evaluate() raised: setup (sandbox, plugin files)
            self._release(slot)
            cause = exc.cause if getattr(exc, "cause", None) is not None else exc
            _set(task.future, exc=EvaluationSetupError(
                f"{slot.worker}: cannot evaluate program {task.job.program.id}: "
                f"{type(cause).__name__}: {_one_line(cause)}"))
            return
        except Exception as exc:  # the worker process or its node is gone
            self._lost(slot, task, exc)
            return
        self._release(slot)
        _set(task.future, result=EvalOutcome(result=result, worker=worker, attempts=task.attempts))

    def _release(self, slot: _Slot) -> None:
        self._busy.remove(slot)
        slot.task = None
        self._idle.append(slot)

    def _lost(self, slot: _Slot, task: _Task, exc: BaseException) -> None:
        self._busy.remove(slot)
        task.lost.append(slot.worker or "an unplaced worker")
        try:
            self._ray.kill(slot.handle, no_restart=True)
        except Exception:
            pass
        if not self._gcs_alive():
            self._queue.appendleft(task)
            self._fail_all(self._gone(exc))
            return
        log.warning("ray executor: worker %s lost while evaluating program %s (%s); attempt %d "
                    "of %d", slot.worker, task.job.program.id, _one_line(exc), task.attempts,
                    self.max_retries + 1)
        if task.attempts > self.max_retries:
            _set(task.future, exc=WorkerLost(
                f"program {task.job.program.id}: its worker died {len(task.lost)} times "
                f"({', '.join(task.lost)}); raise executor_options.max_retries or check the "
                f"nodes' logs (ray logs)"))
        else:
            self._queue.appendleft(task)
        self._spawn()

    def _check_placement(self) -> None:
        """With no actor alive, jobs fail once no actor could be placed for the timeout."""
        if self._idle or self._busy or not self._starting or not self._queue:
            return
        waited = time.monotonic() - min(s.spawned for s in self._starting)
        if waited < self.placement_timeout_s:
            return
        if not self._gcs_alive():
            self._fail_all(self._gone(None))
            return
        need = ", ".join(f"{k}={v:g}" for k, v in self.request.items())
        msg = (f"ray executor: no worker needing {need} could be placed on the cluster at "
               f"{self.address} for {waited:.0f} s (nodes lost?); the run can be resumed once "
               f"the cluster has room")
        while self._queue:
            _set(self._queue.popleft().future, exc=WorkerLost(msg))
        for s in self._starting:
            s.spawned = time.monotonic()

    def _dispatch(self) -> None:
        while self._idle and self._queue:
            task = self._queue.popleft()
            if task.future.done():  # cancelled by the engine
                continue
            try:
                ev, plugins, blobs = self._files_of(task.job)
            except OSError as exc:
                _set(task.future, exc=EvaluationSetupError(
                    f"{exc.filename}: cannot be read to send to the Ray workers: {exc.strerror}"))
                continue
            slot = self._idle.pop()
            send = {sha: blob for sha, blob in blobs.items() if sha not in slot.known}
            cascade = getattr(task.job, "cascade_thresholds", None)
            ref = slot.handle.evaluate.remote(task.job.program, ev, send, dict(task.job.sandbox),
                                              task.job.limits, cascade, plugins)
            slot.known.update(send)
            task.attempts += 1
            slot.task = task
            self._busy.append(slot)
            ref.future().add_done_callback(lambda _f, s=slot, r=ref: self._events.put(("done", s, r)))

    def _files_of(self, job: EvalJob) -> tuple[str | None, tuple[str, ...], dict[str, FileBlob]]:
        blobs: dict[str, FileBlob] = {}
        ev = None
        if job.evaluator is not None:
            ev, blob = self._file(Path(job.evaluator))
            blobs[ev] = blob
        plugins = []
        for p in job.plugin_files:
            sha, blob = self._file(Path(p))
            blobs[sha] = blob
            plugins.append(sha)
        return ev, tuple(plugins), blobs

    def _file(self, path: Path) -> tuple[str, FileBlob]:
        st = path.stat()
        key = (str(path), st.st_mtime_ns, st.st_size)
        hit = self._files.get(key)
        if hit is None:
            data = path.read_bytes()
            hit = self._files[key] = (hashlib.sha256(data).hexdigest(), (path.name, data))
        return hit

    def _gone(self, exc: BaseException | None) -> str:
        detail = f" ({type(exc).__name__}: {_one_line(exc)})" if exc is not None else ""
        return (f"ray executor: the Ray cluster at {self.gcs_address or self.address} went away"
                f"{detail}; restart it and resume the run")

    def _fail_all(self, msg: str) -> None:
        self._broken = msg
        for slot in self._busy:
            if slot.task is not None:
                _set(slot.task.future, exc=WorkerLost(msg))
        while self._queue:
            _set(self._queue.popleft().future, exc=WorkerLost(msg))
        while True:  # jobs submitted meanwhile
            try:
                event = self._events.get_nowait()
            except queue.Empty:
                break
            if event[0] == "submit":
                _set(event[1].future, exc=WorkerLost(msg))


