"""The benchmark an agent is scored on: small task directories inside the example.

An agents example keeps its tasks in ``<example>/tasks/<name>/``, each a tiny evolution task of
its own: ``initial_program.py`` (the program the agent starts from), ``evaluator.py`` (scores a
candidate, run only in the sandbox) and ``README.md`` (its first paragraph is the task's
description, handed to the agent). The example's config names the tasks and marks some
``heldout``: held-out tasks are measured and stored (``heldout/<name>``) but never feed the
agent's score, so selection never sees them.

A task's *normalised improvement* after an agent's calls is
``(best - seed) / (target - seed)`` clipped to [0, 1], where ``seed`` is the score of the task's
initial program, ``best`` the best score the agent's children reached and ``target`` the
task's best possible score (1.0 unless the config says otherwise).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qdevolve.errors import ConfigError

__all__ = ["BenchmarkTask", "ScoringSettings", "load_tasks", "normalised_improvement", "HELDOUT_PREFIX"]

HELDOUT_PREFIX = "heldout/"
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
_TASK_KEYS = ("heldout", "target", "description")


@dataclass(frozen=True)
class BenchmarkTask:
    """One task of the benchmark.

    Attributes:
        name: The task directory's name.
        directory: ``<example>/tasks/<name>``.
        evaluator: Its ``evaluator.py``.
        seed_code: Its ``initial_program.py``.
        description: What to improve, in words (handed to the agent).
        heldout: Measured, never used for selection.
        target: The best score the task allows (normalises the improvement).
    """

    name: str
    directory: Path
    evaluator: Path
    seed_code: str
    description: str
    heldout: bool = False
    target: float = 1.0

    @property
    def metric(self) -> str:
        """The metric name its score is stored under: ``<name>`` or ``heldout/<name>``."""
        return f"{HELDOUT_PREFIX}{self.name}" if self.heldout else self.name


@dataclass(frozen=True)
class ScoringSettings:
    """How an agent is scored (the ``agents`` executor's options).

    Attributes:
        iterations: Agent calls per task: each call gets the task's best program so far as
            its parent and returns one child, which the task's evaluator scores.
        calls: Model calls (``tools.mutate`` + ``tools.generate``) one agent call may make.
        evaluations: ``tools.evaluate`` calls one agent call may make.
        tokens: Tokens one agent call may spend on ``tools.generate``.
        wall_s: Seconds one agent call may take (its process tree is killed after that).
        memory_mb: Memory cap of the agent's processes.
        heldout_draws: Scorings of the best agent and of the seed agent on the held-out tasks
            behind the run summary's verdict (each draw uses other mutation draws; the draw
            stored during the run is the first). Their difference is reported with a
            bootstrap interval (:mod:`qdevolve.agents.interval`); 1 gives no interval.
    """

    iterations: int = 3
    calls: int = 4
    evaluations: int = 3
    tokens: int = 32_000
    wall_s: float = 30.0
    memory_mb: int = 512
    heldout_draws: int = 6

    @classmethod
    def from_options(cls, options: Mapping[str, Any], where: str = "run.executor_options") -> ScoringSettings:
        """Parse the options, naming ``where`` and the keys that exist on an unknown key."""
        known = tuple(cls.__dataclass_fields__)
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(known)}")
        try:
            out = cls(**{k: type(getattr(cls, k))(v) for k, v in options.items()})
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{where}: {exc}") from None
        if out.iterations < 1 or out.calls < 0 or out.evaluations < 0 or out.wall_s <= 0:
            raise ConfigError(f"{where}: iterations must be >= 1, calls and evaluations >= 0, wall_s > 0")
        if not 1 <= out.heldout_draws <= 1000:
            raise ConfigError(f"{where}: heldout_draws must be between 1 and 1000, got {out.heldout_draws}")
        return out


def _description(directory: Path) -> str:
    """The README's first paragraph after its title (or the task's name when it has none)."""
    readme = directory / "README.md"
    if not readme.is_file():
        return directory.name
    paragraphs = [p.strip() for p in readme.read_text(encoding="utf-8").split("\n\n") if p.strip()]
    body = [p for p in paragraphs if not p.startswith("#")]
    return " ".join(body[0].split()) if body else directory.name


def load_tasks(root: Path, spec: Mapping[str, Any] | list[Any]) -> list[BenchmarkTask]:
    """The tasks ``spec`` names, read from ``root`` (``<example>/tasks``).

    ``spec`` maps a task name to its options (``{heldout: true, target: 1.0, description:
    ...}``; ``{}`` or ``null`` for none), or lists names. A name must be a plain directory name
    and the directory must lie inside ``root`` (no ``..``, no symlink out): the controller
    reads nothing outside the example.

    Raises:
        ConfigError: a name, a directory, a file or an option is wrong (named in the message).
    """
    items = [(n, {}) for n in spec] if isinstance(spec, list) else list(dict(spec).items())
    if not items:
        raise ConfigError(f"run.executor_options.tasks: no task named (task directories live in {root})")
    real_root = root.resolve()
    tasks = []
    for name, opts in items:
        where = f"run.executor_options.tasks.{name}"
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ConfigError(f"{where}: a task name must be a plain directory name under {root}")
        opts = dict(opts or {})
        unknown = sorted(set(opts) - set(_TASK_KEYS))
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(_TASK_KEYS)}")
        directory = root / name
        if not directory.resolve().is_relative_to(real_root) or directory.is_symlink():
            raise ConfigError(f"{where}: {directory} leads outside {root}")
        evaluator, seed = directory / "evaluator.py", directory / "initial_program.py"
        for f in (evaluator, seed):
            if not f.is_file() or f.is_symlink() or not f.resolve().is_relative_to(real_root):
                raise ConfigError(f"{where}: {f} is missing (a task directory holds initial_program.py, "
                                  "evaluator.py and README.md)")
        tasks.append(BenchmarkTask(
            name=name, directory=directory, evaluator=evaluator, seed_code=seed.read_text(encoding="utf-8"),
            description=str(opts.get("description") or _description(directory)),
            heldout=bool(opts.get("heldout", False)), target=float(opts.get("target", 1.0))))
    if all(t.heldout for t in tasks):
        raise ConfigError("run.executor_options.tasks: every task is held out; at least one must be scored")
    return tasks


def normalised_improvement(seed: float, best: float, target: float) -> float:
    """``(best - seed) / (target - seed)`` clipped to [0, 1] (0 when the seed is at the target)."""
    if target <= seed:
        return 0.0
    return min(1.0, max(0.0, (best - seed) / (target - seed)))
