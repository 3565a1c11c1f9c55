"""The agent-side ``qdevolve_agent`` module (staged into the agent's sandbox under that name).

Standard library only: the agent's interpreter never imports qdevolve.  It holds the
exceptions an agent may catch and the ``tools`` object ``propose`` receives, whose every
method sends one request frame (4-byte big-endian length + UTF-8 JSON) on the request pipe
and waits for one reply frame on the reply pipe::

    request:  {"op": "generate" | "mutate" | "evaluate", "arg": <str>}
              {"op": "lineage" | "remaining"}
    reply:    {"ok": <plain JSON value>}
              {"error": "budget" | "unavailable" | "tool", "message": <str>}

The controller alone counts and refuses; nothing here is trusted by it.
"""

import json
import os
import struct

__all__ = ["BudgetExhausted", "ToolUnavailable", "ToolError", "Tools"]

_HEADER = struct.Struct(">I")


class BudgetExhausted(Exception):
    """The request would go past the agent's budget (calls, evaluations or tokens)."""


class ToolUnavailable(Exception):
    """The tool cannot be served here (e.g. no model backend offline)."""


class ToolError(Exception):
    """The controller-side tool failed for another reason (the message says why)."""


class Channel:
    """The agent's ends of the pipe pair."""

    def __init__(self, read_fd, write_fd):
        self.read_fd, self.write_fd = read_fd, write_fd

    def send(self, message):
        body = json.dumps(message, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
        data = memoryview(_HEADER.pack(len(body)) + body)
        while data:
            data = data[os.write(self.write_fd, data):]

    def _exact(self, n):
        out = b""
        while len(out) < n:
            chunk = os.read(self.read_fd, n - len(out))
            if not chunk:
                raise ToolError("the controller closed the reply pipe")
            out += chunk
        return out

    def recv(self):
        (size,) = _HEADER.unpack(self._exact(_HEADER.size))
        return json.loads(self._exact(size).decode("utf-8"))


_ERRORS = {"budget": BudgetExhausted, "unavailable": ToolUnavailable}


class Tools:
    """What ``propose(task, parent, feedback, tools)`` gets as ``tools``."""

    BudgetExhausted = BudgetExhausted
    ToolUnavailable = ToolUnavailable
    ToolError = ToolError

    def __init__(self, channel):
        self._channel = channel

    def _call(self, op, *arg):
        message = {"op": op}
        if arg:
            message["arg"] = arg[0]
        self._channel.send(message)
        reply = self._channel.recv()
        if "ok" in reply:
            return reply["ok"]
        raise _ERRORS.get(reply.get("error"), ToolError)(reply.get("message", "tool error"))

    def generate(self, prompt):
        """The model's completion of ``prompt`` (one call; its tokens count)."""
        return self._call("generate", prompt)

    def mutate(self, code):
        """``code`` changed once by the run's offline operator (one call)."""
        return self._call("mutate", code)

    def evaluate(self, code):
        """``{"status", "score", "metrics", "feedback"}`` of ``code`` (one evaluation)."""
        return self._call("evaluate", code)

    def lineage(self):
        """Earlier attempts ``[{"id", "parent", "score", "status"}]`` (free)."""
        return self._call("lineage")

    def remaining(self):
        """What is left of the budget: ``{"calls", "evaluations", "tokens"}`` (free)."""
        return self._call("remaining")
