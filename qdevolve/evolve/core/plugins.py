"""The plugins one run uses, built once from its config (a bad name fails before any evaluation)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from qdevolve import registry
from qdevolve.errors import ConfigError
from qdevolve.evolve.executors import EvalJob, Executor
from qdevolve.evolve.setup import Example, RunConfig
from qdevolve.mutation.base import Mutation
from qdevolve.sandbox import resolve_sandbox
from qdevolve.types import EvalResult, Program

__all__ = ["EnginePlugins", "RewardReporting", "build_backend", "make_limits"]


@runtime_checkable
class RewardReporting(Protocol):
    """A backend that learns from results (the model ensemble's bandit)."""

    def report(self, model: str, reward: float) -> None: ...


def make_limits(limits: dict[str, Any]) -> Any:
    """Build :class:`qdevolve.sandbox.SandboxLimits` from the config's ``limits`` mapping."""
    from qdevolve.sandbox import SandboxLimits

    try:
        kw = dict(limits)
        if isinstance(kw.get("env_allow"), list):
            kw["env_allow"] = tuple(kw["env_allow"])
        if "env" in kw:  # extra environment for the evaluator: validated names and values
            from qdevolve.evolve.setup import sandbox_env

            kw["env"] = sandbox_env(kw["env"])
        return SandboxLimits(**kw)
    except TypeError as exc:
        from dataclasses import fields

        from qdevolve.suggest import did_you_mean

        known = [f.name for f in fields(SandboxLimits)]
        hint = did_you_mean([k for k in limits if k not in known], known)
        raise ConfigError(f"limits: {exc}" + (f"; {hint}" if hint else "")) from None


def build_backend(config: RunConfig) -> Any:
    """The backend of ``config.backend``; one that takes a ``seed`` (the ensemble's model draw)
    gets the run's seed unless the spec sets one, so a run's model choices are reproducible."""
    if not config.backend:
        return None
    spec = dict(config.backend)
    if "seed" not in spec and config.seed is not None:
        import inspect

        try:
            params = inspect.signature(registry.backend.get(spec.get("type", ""))).parameters
        except Exception:  # an unknown type: create() below says so in one line
            params = {}
        if "seed" in params:
            spec["seed"] = config.seed
    return registry.backend.create(spec)


@dataclass
class EnginePlugins:
    """Archive, selection, operators, executor and the evaluation settings of one run."""

    archive: Any
    selection: Any
    operators: list[Mutation]
    weights: np.ndarray
    names: list[str]
    executor: Executor
    sandbox: dict[str, Any]  # resolved spec each executor slot builds its sandbox from
    limits: Any
    cascade: tuple[float, ...] | None
    novelty: Any = None
    plugin_files: tuple[Path, ...] = ()  # ``--plugin`` files a remote worker loads before evaluating

    @property
    def sandbox_type(self) -> str:
        return str(self.sandbox["type"])

    @classmethod
    def build(cls, config: RunConfig) -> EnginePlugins:
        from qdevolve.evolve.core.breeder import build_operators
        from qdevolve.evolve.executors import local  # noqa: F401  (registers the built-in 'local')

        archive = registry.archive.create(config.archive)
        selection = registry.selection.create(config.selection)
        operators, weights, names = build_operators(config)
        limits = make_limits(config.limits)
        sandbox = resolve_sandbox(config.sandbox)
        for operator in operators:  # an operator that runs code itself (``self``) follows the run's sandbox
            use_sandbox = getattr(operator, "use_sandbox", None)
            if use_sandbox is not None:
                use_sandbox(sandbox)
        novelty = None
        if config.novelty is not None:
            from qdevolve.evolve.core.novelty_filter import EmbeddingNoveltyFilter

            try:
                novelty = EmbeddingNoveltyFilter(**config.novelty)
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"novelty: {exc}") from None
        executor = registry.executor.create({"type": config.executor, **config.executor_options},
                                            slots=max(1, int(config.workers)))
        cascade = config.evaluator.get("cascade_thresholds")
        return cls(archive, selection, operators, weights, names, executor, sandbox, limits,
                   None if cascade is None else tuple(float(x) for x in cascade), novelty)

    def job(self, program: Program, example: Example) -> EvalJob:
        return EvalJob(program=program, evaluator=example.evaluator_path, limits=self.limits, sandbox=self.sandbox,
                       plugin_files=self.plugin_files, cascade_thresholds=self.cascade)

    def check_seed(self, example: Example, result: EvalResult) -> None:
        """A seed that does not evaluate ``ok`` is a setup error (nothing is stored); the error
        carries the traceback's last frames and the ``qdevolve sandbox exec`` command that
        reproduces it (:mod:`qdevolve.evolve.setup.seed_failure`)."""
        if result.status != "ok" or result.score is None:
            from qdevolve.evolve.setup import seed_failure

            raise seed_failure(example.seed_path, example.evaluator_path, result, sandbox_type=self.sandbox_type,
                               limits=self.limits, cascade=self.cascade,
                               image=self.sandbox.get("image") if self.sandbox_type == "docker" else None)

    def close(self) -> None:
        """Close the executor, then every operator that holds resources (``close()`` is optional)."""
        self.executor.close()
        for op in self.operators:
            close = getattr(op, "close", None)
            if callable(close):
                close()
