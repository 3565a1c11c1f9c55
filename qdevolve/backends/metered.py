"""One meter for every token: the wrapper each model client of a run generates through.

The run builds one :class:`MeteredBackend` over its backend and hands *views* of it to
everything that asks a model for text: the engine's mutations, each agent's
``tools.generate`` (spender ``agent:<program id>``), an LLM judge (``judge``), any later
client. Every completion a view returns is reported to the run's sink as
``sink(spender, model, prompt_tokens, completion_tokens)`` (the budget meter's ``spend``), so
the run's token and cost budget sees it whoever spent it. A client a plugin built itself (a
judge with its own ``api_base``) is wrapped with :func:`meter_clients`, so it is metered
anyway.

The meter only counts; the run's loop stops starting work once the budget is spent (whoever
spent it), and what is in flight then finishes as it would have: a request is never refused
halfway through an agent's scoring or a judge's verdict, which would store a distorted score.
The overshoot is bounded by the work in flight (each agent call by its own ``AgentBudget``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from qdevolve.backends.base import Completion, GenerationRequest

__all__ = ["MeteredBackend", "meter_clients", "Sink"]

Sink = Callable[[str, "str | None", int, int], None]


class MeteredBackend:
    """``inner`` with every completion reported to ``sink`` under ``spender`` (module docstring).

    Any other attribute (``load_policy``, ``close``, deadlines...) is the inner backend's.
    """

    def __init__(self, inner: Any, sink: Sink, spender: str = "engine") -> None:
        if isinstance(inner, MeteredBackend):  # never count a completion twice
            inner = inner.inner
        if not hasattr(inner, "generate"):
            raise TypeError(f"MeteredBackend needs a backend with generate(); got {type(inner).__name__}")
        self.inner, self.sink, self.spender = inner, sink, str(spender)

    def for_spender(self, spender: str) -> MeteredBackend:
        """A view of the same backend and meter that bills ``spender``."""
        return MeteredBackend(self.inner, self.sink, spender)

    async def generate(self, requests: list[GenerationRequest]) -> list[list[Completion]]:
        results = await self.inner.generate(requests)
        for group in results or []:
            for comp in group:
                self.sink(self.spender, getattr(comp, "model", None), int(getattr(comp, "prompt_tokens", 0) or 0),
                          int(getattr(comp, "completion_tokens", 0) or 0))
        return results

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (during unpickling or a failed __init__)
            raise AttributeError(name)
        return getattr(self.inner, name)


def meter_clients(obj: Any, sink: Sink, spender: str) -> list[str]:
    """Wrap every model client ``obj`` holds in an attribute (an object with an ``async
    generate``, the backend contract), its own or the run's, so it spends on ``sink`` as
    ``spender``; returns the names wrapped."""
    wrapped = []
    for name, value in list(vars(obj).items()) if hasattr(obj, "__dict__") else []:
        if value is None or not inspect.iscoroutinefunction(getattr(value, "generate", None)):
            continue
        setattr(obj, name, MeteredBackend(value, sink, spender))
        wrapped.append(name)
    return wrapped
