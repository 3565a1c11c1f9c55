"""The real controller-side tools an agent's requests are served with (:class:`TaskTools`).

Each handler runs in the controller and never executes the code it is handed:

* ``evaluate``: the candidate goes through the given sandbox with the task's evaluator
  (``sandbox.evaluate(program, evaluator, limits)``), as any candidate of a run does;
* ``mutate``: the given mutation plugin (offline: the registry's ``ast``) proposes one
  child of the code with a generator seeded from ``seed``;
* ``generate``: one request to the given backend; :class:`ToolUnavailable` without one;
* ``lineage``: a copy of the list it was given.

The runtime counts these calls against the agent's budget; ``TaskTools`` only serves them.
``private_paths`` names what the agent's process must not see: the paths given as ``hide``
(the agents loop passes the whole example directory, so every task's evaluator is hidden),
and always the evaluator's own directory.
"""

from __future__ import annotations

import asyncio
import copy
import threading
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from qdevolve.agents.interface import ToolUnavailable
from qdevolve.sandbox.limits import SandboxLimits
from qdevolve.types import Program

__all__ = ["TaskTools", "FEEDBACK_CHARS"]

#: Characters of evaluator feedback (artifacts, error) returned to the agent.
FEEDBACK_CHARS = 4000
#: Agents' ``generate`` calls (scoring slots, self-modification) reach the run's backend one at a time.
_GENERATE_LOCK = threading.Lock()


class TaskTools:
    """Tools over one task: its evaluator, the run's sandbox, operator and backend.

    Args:
        evaluator: The task's ``evaluator.py``.
        sandbox: A created sandbox instance (``registry.sandbox.create(...)``); not closed here.
        operator: A mutation plugin instance (``registry.mutation.create({"type": "ast"})``)
            or ``None`` (``mutate`` is then unavailable).
        backend: A generation backend instance or ``None`` (``generate`` unavailable).
        lineage: Earlier attempts ``{"id", "parent", "score", "status"}``.
        seed: Seeds the generator the operator draws from.
        limits: Limits of each evaluation (default: the sandbox's own).
        language: The language of the candidates.
        max_tokens: ``max_tokens`` of a ``generate`` request.
        hide: Paths the agent's process must not see (default: the evaluator's directory,
            which is hidden whatever is given).
    """

    def __init__(self, evaluator: Path, sandbox: Any, operator: Any = None, backend: Any = None,
                 lineage: list[dict] | None = None, seed: int = 0, *, limits: SandboxLimits | None = None,
                 language: str = "python", max_tokens: int = 4096,
                 hide: Sequence[str | Path] | None = None) -> None:
        self.evaluator = Path(evaluator).resolve()
        if not self.evaluator.is_file():
            raise FileNotFoundError(f"TaskTools: evaluator {self.evaluator} does not exist")
        if isinstance(hide, (str, Path)):
            raise TypeError("TaskTools: hide must be a sequence of paths, not one path")
        self._hide = _hidden(self.evaluator.parent, hide)
        self.sandbox = sandbox
        self.operator = operator
        self.backend = backend
        self._lineage = [dict(x) for x in (lineage or [])]
        self.rng = np.random.default_rng(int(seed))
        self.limits = limits
        self.language = language
        self.max_tokens = int(max_tokens)

    @property
    def private_paths(self) -> tuple[str, ...]:
        """Paths the agent's process must not see: ``hide`` and the evaluator's directory."""
        return self._hide

    def generate(self, prompt: str) -> tuple[str, int]:
        """(completion, prompt + completion tokens); :class:`ToolUnavailable` without a backend."""
        if self.backend is None:
            raise ToolUnavailable("no model backend is configured (offline run): use tools.mutate")
        from qdevolve.backends.base import GenerationRequest

        request = GenerationRequest(prompt=prompt, n=1, max_tokens=self.max_tokens,
                                    seed=int(self.rng.integers(0, 2**31 - 1)))
        with _GENERATE_LOCK:  # each call runs on its own event loop; a backend binds one loop at a time
            completion = _run(self.backend.generate([request]))[0][0]
        if completion.error:
            raise RuntimeError(f"the backend failed: {completion.error}")
        used = int(completion.prompt_tokens or 0) + int(completion.completion_tokens or 0)
        return completion.text, used if used > 0 else (len(prompt) + len(completion.text)) // 4

    def mutate(self, code: str) -> str:
        """One child of ``code`` by the operator (raises when it finds none)."""
        if self.operator is None:
            raise ToolUnavailable("no mutation operator is configured")
        from qdevolve.mutation.base import MutationContext

        parent = Program(code=code, language=self.language)
        context = MutationContext(rng=self.rng, n=1)
        candidates = _run(self.operator.propose(parent, context, self.backend))
        if not candidates or candidates[0].code is None:
            why = candidates[0].error if candidates else "no candidate"
            raise RuntimeError(f"the {getattr(self.operator, 'name', 'mutation')} operator found no child: {why}")
        return candidates[0].code

    def evaluate(self, code: str) -> dict:
        """``{"status", "score", "metrics", "feedback"}`` of ``code`` run through the sandbox."""
        result = self.sandbox.evaluate(Program(code=code, language=self.language), self.evaluator, self.limits)
        parts = [result.error or ""] + [f"{k}: {v}" for k, v in sorted(result.artifacts.items())
                                         if k in ("feedback", "stderr", "traceback")]
        return {"status": result.status, "score": result.score, "metrics": dict(result.metrics),
                "feedback": "\n".join(p for p in parts if p)[:FEEDBACK_CHARS]}

    def lineage(self) -> list[dict]:
        """A copy of the earlier attempts."""
        return copy.deepcopy(self._lineage)


def _hidden(evaluator_dir: Path, hide: Sequence[str | Path] | None) -> tuple[str, ...]:
    """The resolved paths to hide; the evaluator's directory is added unless one of them holds it."""
    paths = [Path(p).resolve() for p in (hide or ())]
    if not any(evaluator_dir == p or p in evaluator_dir.parents for p in paths):
        paths.append(evaluator_dir)
    return tuple(dict.fromkeys(str(p) for p in paths))


def _run(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run ``coro`` to completion from synchronous code, inside a running loop or not."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]
