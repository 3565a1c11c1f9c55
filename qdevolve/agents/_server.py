"""The controller-side tool server: answers one agent request at a time, within the budget.

Budget semantics (all counted here, never by the agent):

* ``generate`` and ``mutate`` each take one of ``budget.calls``; ``generate`` is also refused
  once the tokens used reach ``budget.tokens`` (a call's tokens are the backend's figure, or
  ``(len(prompt) + len(completion)) // 4`` when it reports none; the call that crosses the
  budget is answered and counted in full).
* ``evaluate`` takes one of ``budget.evaluations``.
* ``lineage`` and ``remaining`` are free.
* A refused request (past the budget, or the tool unavailable) costs nothing and is answered
  ``{"error": "budget" | "unavailable"}``; after :data:`FLOOD_LIMIT` refusals the run ends.
* A request is answered only when its argument is a string of at most ``message_bytes``
  UTF-8 bytes; anything else (unknown op, extra keys, a reply-shaped message) is a protocol
  violation that ends the run ``invalid``.

Replies carry only plain JSON data (the handlers' results are round-tripped through JSON).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from qdevolve.agents.interface import AgentBudget, AgentTools, BudgetExhausted, ToolUnavailable

__all__ = ["FLOOD_LIMIT", "ProtocolViolation", "Flood", "ToolServer"]

#: Refused requests after which the agent's run is ended (status ``killed``).
FLOOD_LIMIT = 64

_WITH_ARG = {"generate", "mutate", "evaluate"}
_FREE = {"lineage", "remaining"}


class ProtocolViolation(Exception):
    """The agent sent a message the protocol does not allow (the run ends ``invalid``)."""


class Flood(Exception):
    """The agent kept sending requests past its budget (the run ends ``killed``)."""


@dataclass
class Usage:
    """What the agent has used so far."""

    calls: int = 0
    evaluations: int = 0
    tokens: int = 0
    refused: int = 0


class ToolServer:
    """Dispatches the agent's requests to ``tools``, counting against ``budget``."""

    def __init__(self, tools: AgentTools, budget: AgentBudget) -> None:
        self.tools = tools
        self.budget = budget
        self.used = Usage()

    def remaining(self) -> dict[str, int]:
        """Budget left: ``{"calls", "evaluations", "tokens"}``."""
        b, u = self.budget, self.used
        return {"calls": max(b.calls - u.calls, 0), "evaluations": max(b.evaluations - u.evaluations, 0),
                "tokens": max(b.tokens - u.tokens, 0)}

    def handle(self, message: Any) -> dict[str, Any]:
        """The reply to one request.

        Raises:
            ProtocolViolation: ``message`` is not a request.
            Flood: this request was refused and the agent has been refused too often.
        """
        op, arg = self._parse(message)
        if op == "remaining":
            return {"ok": self.remaining()}
        if op == "lineage":
            return self._answer(lambda: list(self.tools.lineage()))
        left = self.remaining()
        if op == "evaluate" and left["evaluations"] <= 0:
            return self._refuse("budget", f"evaluation budget of {self.budget.evaluations} spent")
        if op in ("generate", "mutate") and left["calls"] <= 0:
            return self._refuse("budget", f"call budget of {self.budget.calls} spent")
        if op == "generate" and left["tokens"] <= 0:
            return self._refuse("budget", f"token budget of {self.budget.tokens} spent")
        return getattr(self, "_" + op)(arg)

    # -- one tool each ---------------------------------------------------------------------
    def _generate(self, prompt: str) -> dict[str, Any]:
        try:
            text, tokens = self.tools.generate(prompt)
        except ToolUnavailable as exc:
            return self._refuse("unavailable", str(exc) or "no model backend is configured")
        except BudgetExhausted as exc:
            return self._refuse("budget", str(exc))
        except Exception as exc:  # noqa: BLE001 - a failing tool is reported to the agent
            self.used.calls += 1
            return _tool_error(exc)
        if not isinstance(text, str):
            self.used.calls += 1
            return {"error": "tool", "message": f"the backend returned {type(text).__name__}, not text"}
        ok = isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 0
        self.used.calls += 1
        self.used.tokens += tokens if ok else (len(prompt) + len(text)) // 4
        return {"ok": text}

    def _mutate(self, code: str) -> dict[str, Any]:
        self.used.calls += 1
        return self._answer(lambda: self.tools.mutate(code), refund="calls")

    def _evaluate(self, code: str) -> dict[str, Any]:
        self.used.evaluations += 1
        return self._answer(lambda: self.tools.evaluate(code), refund="evaluations")

    # -- helpers ---------------------------------------------------------------------------
    def _answer(self, call: Any, refund: str | None = None) -> dict[str, Any]:
        try:
            value = call()
        except ToolUnavailable as exc:
            if refund:
                setattr(self.used, refund, getattr(self.used, refund) - 1)
            return self._refuse("unavailable", str(exc) or "tool unavailable")
        except BudgetExhausted as exc:
            if refund:
                setattr(self.used, refund, getattr(self.used, refund) - 1)
            return self._refuse("budget", str(exc))
        except Exception as exc:  # noqa: BLE001 - a failing tool is reported to the agent
            return _tool_error(exc)
        try:
            return {"ok": json.loads(json.dumps(_plain(value), allow_nan=False))}
        except (TypeError, ValueError, RecursionError) as exc:
            return {"error": "tool", "message": f"the tool's reply is not plain JSON data: {exc}"}

    def _refuse(self, kind: str, why: str) -> dict[str, Any]:
        self.used.refused += 1
        if self.used.refused > FLOOD_LIMIT:
            raise Flood(f"{self.used.refused} requests refused (last: {why})")
        return {"error": kind, "message": why}

    def _parse(self, message: Any) -> tuple[str, str | None]:
        if not isinstance(message, dict) or not isinstance(message.get("op"), str):
            raise ProtocolViolation(f"a {type(message).__name__} where a request {{'op': ...}} was expected")
        op = message["op"]
        if op in _FREE:
            if set(message) != {"op"}:
                raise ProtocolViolation(f"request {op!r} takes no other keys, got {sorted(message)}")
            return op, None
        if op not in _WITH_ARG:
            raise ProtocolViolation(f"unknown request {op[:40]!r}")
        if set(message) != {"op", "arg"}:
            raise ProtocolViolation(f"request {op!r} must carry exactly 'op' and 'arg', got {sorted(message)}")
        arg = message["arg"]
        if not isinstance(arg, str):
            raise ProtocolViolation(f"request {op!r} needs a string argument, got {type(arg).__name__}")
        if len(arg.encode("utf-8", "surrogatepass")) > self.budget.message_bytes:
            raise ProtocolViolation(f"request {op!r} argument exceeds message_bytes={self.budget.message_bytes}")
        return op, arg


def _plain(value: Any, depth: int = 0) -> Any:
    """``value`` as plain JSON data: non-finite floats become ``None``, arrays lists, tuples
    lists, unknown objects their ``str``."""
    if depth > 32:
        raise ValueError("nested deeper than 32 levels")
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, depth + 1) for v in value]
    if hasattr(value, "tolist"):
        return _plain(value.tolist(), depth + 1)
    return str(value)


def _tool_error(exc: Exception) -> dict[str, Any]:
    line = f"{type(exc).__name__}: {exc}".replace("\n", " ")[:500]
    return {"error": "tool", "message": line}
