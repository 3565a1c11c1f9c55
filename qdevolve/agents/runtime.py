"""Run one agent once: sandboxed process, tool requests served within the budget, one outcome.

:func:`run_agent` starts the agent (``_launch``) as the candidate principal of the chosen
sandbox backend, then serves its requests over the pipe pair (``_wire`` frames, ``_server``
budget) until the agent sends its last frame, closes the pipe, breaks the protocol, floods
refused requests or runs past ``budget.wall_s``.  It then kills the agent's whole process
tree and turns what it saw into an :class:`~qdevolve.agents.interface.AgentOutcome` in one
function (:func:`classify`).

Trust: everything from the agent is untrusted bytes.  The controller decodes JSON only (no
pickle, no eval), checks every message's shape and size, keeps the counters itself and
takes the child as *text* (it is evaluated later by the run's sandbox).  The outcome's
status and counts come from what the controller observed, never from what the agent says.
"""

from __future__ import annotations

import hashlib
import json
import math
import signal
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from qdevolve.agents import _launch, _wire
from qdevolve.agents._server import Flood, ProtocolViolation, ToolServer
from qdevolve.agents.interface import AgentBudget, AgentOutcome, AgentTask, AgentTools

__all__ = ["run_agent", "classify", "Seen", "AGENT_BACKENDS"]

#: Sandbox backends an agent can run on.
AGENT_BACKENDS = ("local", "bwrap")
#: Bytes a frame may add around its payload (the JSON envelope).
ENVELOPE_BYTES = 1024


@dataclass
class Seen:
    """What the controller observed about one agent run (input of :func:`classify`).

    Attributes:
        end: ``result`` | ``error`` (the bootstrap reported a failure) | ``closed`` (the
            pipe closed without a last frame) | ``invalid`` | ``timeout`` | ``flood``.
        child: The child, when ``end == "result"``.
        detail: The one-line reason (``invalid``/``error``/``flood``).
        memory: The bootstrap reported ``MemoryError``.
        exit_code: The process's exit code (negative or ``128 + N``: a signal).
        shell_style: Exit codes above 128 mean a signal.
        oom_kills: OOM kills in the agent's memory cgroup.
        log: The tail of the agent's output.
    """

    end: str
    child: str | None = None
    detail: str = ""
    memory: bool = False
    exit_code: int | None = None
    shell_style: bool = False
    oom_kills: int = 0
    log: str = ""


def classify(seen: Seen, wall_s: float) -> tuple[str, str | None]:
    """``(status, one-line error)`` of an agent run; the one place statuses are decided."""
    if seen.end == "result":
        return "ok", None
    if seen.end == "invalid":
        return "invalid", seen.detail
    if seen.end == "timeout":
        return "timeout", f"wall-clock limit of {wall_s:g} s reached; the agent's process tree was killed"
    if seen.end == "flood":
        return "killed", f"kept calling past its budget ({seen.detail}); the run was ended"
    if seen.memory or seen.oom_kills > 0 or "MemoryError" in seen.log[-2000:]:
        return "memory", "memory limit reached" + (f" ({seen.detail})" if seen.detail else "")
    if seen.end == "error":
        return "error", f"propose failed: {seen.detail}"
    code, sig = seen.exit_code, None
    if code is not None and code < 0:
        sig = -code
    elif code is not None and seen.shell_style and 128 < code < 128 + 65:
        sig = code - 128
    if sig is not None:
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return "killed", f"killed by {name} before returning a child"
    if code not in (None, 0):
        return "error", f"exited with status {code} before returning a child"
    return "error", "exited without returning a child"


def _spec(sandbox: Mapping[str, Any] | str) -> dict[str, Any]:
    from qdevolve.sandbox import resolve_sandbox

    spec = {"type": sandbox} if isinstance(sandbox, str) else dict(sandbox)
    spec = resolve_sandbox(spec)
    if spec["type"] not in AGENT_BACKENDS:
        raise ValueError(f"an agent runs on the local or bwrap sandbox, not {spec['type']!r}: "
                         "use sandbox='bwrap' (or 'local')")
    spec["warm"] = False
    return spec


def _check(agent_code: Any, parent: Any, feedback: Any, budget: AgentBudget) -> None:
    if not isinstance(agent_code, str) or not isinstance(parent, str):
        raise TypeError("run_agent: agent_code and parent must be strings")
    for name in ("calls", "evaluations", "tokens", "memory_mb", "message_bytes"):
        value = getattr(budget, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"AgentBudget.{name} must be a whole number >= 0, got {value!r}")
    if not (isinstance(budget.wall_s, (int, float)) and math.isfinite(budget.wall_s) and budget.wall_s > 0):
        raise ValueError(f"AgentBudget.wall_s must be a positive number of seconds, got {budget.wall_s!r}")
    if budget.memory_mb < 64:
        raise ValueError(f"AgentBudget.memory_mb must be at least 64 (an interpreter needs it), got {budget.memory_mb}")
    try:
        json.dumps(feedback, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"run_agent: feedback must be plain JSON data: {exc}") from None


def run_agent(agent_code: str, *, task: AgentTask, parent: str, feedback: dict, tools: AgentTools,
              budget: AgentBudget, sandbox: Mapping[str, Any] | str = "auto") -> AgentOutcome:
    """Run ``agent_code``'s ``propose`` once; see :func:`qdevolve.agents.interface.run_agent`.

    Raises:
        ValueError: a bad budget, feedback that is not plain JSON data, or a sandbox type
            other than ``local``/``bwrap`` (nothing the agent does raises).
    """
    from qdevolve import registry

    _check(agent_code, parent, feedback, budget)
    spec = _spec(sandbox)
    who = f"agent {hashlib.sha256(agent_code.encode()).hexdigest()[:10]} on task {task.name!r}"
    server = ToolServer(tools, budget)
    start = time.monotonic()
    box = registry.sandbox.create(spec)
    try:
        hide = [_launch.repository_root(), *getattr(tools, "private_paths", ())]
        payload = {"task": asdict(task), "parent": parent, "feedback": feedback}
        try:
            run = _launch.launch(box, spec["type"], agent_code, payload, budget, hide)
        except OSError as exc:
            return AgentOutcome("error", None, 0, 0, 0, time.monotonic() - start,
                                error=f"{who}: the {spec['type']} sandbox failed to start: {exc}")
        seen = _serve(run, server, budget, start + budget.wall_s)
        code, ooms = _launch.terminate(run, grace_s=1.0 if seen.end in ("result", "error", "closed") else 0.0)
        seen.exit_code, seen.oom_kills, seen.shell_style = code, ooms, run.shell_style
        seen.log = _launch.log_tail(run)
    finally:
        box.close()
    status, error = classify(seen, budget.wall_s)
    used = server.used
    return AgentOutcome(status=status, child=seen.child if status == "ok" else None, calls=used.calls,
                        evaluations=used.evaluations, tokens=used.tokens, wall_s=time.monotonic() - start,
                        error=None if error is None else f"{who}: {error}"[:1000], log=seen.log)


def _serve(run: _launch.Launched, server: ToolServer, budget: AgentBudget, deadline: float) -> Seen:
    """Answer the agent's requests until its run ends; what was seen."""
    limit = budget.message_bytes + ENVELOPE_BYTES
    while True:
        try:
            message = _wire.read_frame(run.requests, limit, deadline)
        except _wire.Deadline:
            return Seen("timeout")
        except _wire.Closed:
            return Seen("closed")
        except _wire.FrameError as exc:
            return Seen("invalid", detail=f"bad message on the agent pipe: {exc}")
        if isinstance(message, dict) and message.get("op") in ("result", "error"):
            return _last(message, budget)
        try:
            reply = server.handle(message)
        except ProtocolViolation as exc:
            return Seen("invalid", detail=f"protocol violation: {exc}")
        except Flood as exc:
            return Seen("flood", detail=str(exc))
        if time.monotonic() >= deadline:
            return Seen("timeout")
        try:
            _wire.write_frame(run.replies, _reply_frame(reply, budget), deadline)
        except _wire.Deadline:
            return Seen("timeout")
        except _wire.Closed:
            return Seen("closed")


def _reply_frame(reply: dict[str, Any], budget: AgentBudget) -> bytes:
    frame = _wire.encode(reply)
    if len(frame) > budget.message_bytes + ENVELOPE_BYTES:
        frame = _wire.encode({"error": "tool", "message": f"the reply exceeds message_bytes={budget.message_bytes}"})
    return frame


def _last(message: dict[str, Any], budget: AgentBudget) -> Seen:
    """The agent's last frame: its child, or the failure its bootstrap reported."""
    keys = set(message)
    if message["op"] == "error":
        if keys != {"op", "kind", "error"} or message["kind"] not in ("error", "memory") \
                or not isinstance(message["error"], str):
            return Seen("invalid", detail=f"malformed error message with keys {sorted(keys)}")
        line = " ".join(message["error"].split())[:500]
        return Seen("error", detail=line, memory=message["kind"] == "memory")
    if keys == {"op", "child", "type"} and message["child"] is None and isinstance(message["type"], str):
        return Seen("invalid", detail=f"propose returned {message['type'][:60]}, not a string")
    if keys != {"op", "child"}:
        return Seen("invalid", detail=f"malformed result message with keys {sorted(keys)[:8]}")
    child = message["child"]
    if not isinstance(child, str):
        return Seen("invalid", detail=f"propose returned {type(child).__name__}, not a string")
    size = len(child.encode("utf-8", "surrogatepass"))
    if size > budget.message_bytes:
        return Seen("invalid", detail=f"the child is {size} bytes, over message_bytes={budget.message_bytes}")
    return Seen("result", child=child)
