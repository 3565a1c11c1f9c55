"""The generation-backend contract (kind ``backend``).

A backend turns a batch of :class:`GenerationRequest` into completions: for each request,
``n`` :class:`Completion` objects with text, token ids and per-token log-probs where the
backend can give them, the finish reason, token usage, and the policy version that produced
them. Backends are asynchronous; the engine awaits ``generate`` while sandboxes evaluate.

Optional members the engine uses when a backend has them (``hasattr``):

* ``report(model, reward)``: credit a model of an ensemble (the UCB1 bandit);
* ``state() -> dict`` / ``restore(state)``: JSON-safe model-choice state, stored with the
  run and restored on resume;
* ``set_deadline(epoch_seconds | None)``: the run's wall-time end; no wait or request in
  flight outlives it;
* ``close()``: release connections or engines.

``generate`` raises :class:`qdevolve.errors.RunAborted` when the run cannot go on (the
server is unreachable); every other failure is a completion with ``error`` set.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["GenerationRequest", "Completion", "Backend"]


@dataclass
class GenerationRequest:
    """One prompt to sample from.

    Attributes:
        messages: Chat messages (``[{"role": ..., "content": ...}]``); or use ``prompt``.
        prompt: A plain-text prompt, for completion-style models.
        n: Completions to sample.
        temperature, top_p, max_tokens, seed, stop: Sampling settings.
        metadata: Passed through (e.g. the parent id).
    """

    messages: list[dict[str, str]] | None = None
    prompt: str | None = None
    n: int = 1
    temperature: float = 0.7
    top_p: float = 1.0
    max_tokens: int = 4096
    seed: int | None = None
    stop: list[str] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def text(self) -> str:
        """The prompt as one text (messages joined) for hashing and storage."""
        if self.prompt is not None:
            return self.prompt
        return "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in self.messages or [])


@dataclass
class Completion:
    """One sampled completion.

    Attributes:
        text: Generated text ('' on failure).
        token_ids: Completion token ids (empty when unknown).
        logprobs: Per-token log-probs under the sampling policy (empty when unknown).
        prompt_token_ids: Prompt token ids (empty when unknown).
        finish_reason: ``stop``, ``length``, ``error``...
        prompt_tokens / completion_tokens: Token usage.
        policy_version: Version of the policy that sampled it (``None`` for a fixed model).
        model: Model name.
        error: Transport / server error message when the request failed.
        latency_s: Seconds the request took.
        es_member: The evolution-strategies population member whose perturbed weights
            sampled it (``None`` outside ES training).
    """

    text: str
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    prompt_token_ids: list[int] = field(default_factory=list)
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    policy_version: int | None = None
    model: str | None = None
    error: str | None = None
    latency_s: float = 0.0
    es_member: int | None = None


@runtime_checkable
class Backend(Protocol):
    """Protocol of kind ``backend``."""

    async def generate(self, requests: list[GenerationRequest]) -> list[list[Completion]]: ...

    def load_policy(self, version: int, path: str | None) -> None: ...
