"""The one function that turns how a sandbox ended into an `EvalResult` status.

Every backend reports the same facts (:class:`Outcome`) and :func:`classify` alone decides
the status, so exit codes, signals and OOM flags are normalised in one place:

* ``timeout``: the controller's wall clock fired, or the CPU limit (SIGXCPU at the soft
  limit, SIGKILL at the hard one; epicbox's rule: SIGKILL without an OOM flag after the CPU
  budget is spent counts as a timeout).
* ``memory``: the runner saw ``MemoryError``, or the engine reports an OOM kill.
* ``killed``: any other signal.
* ``error``: a non-zero exit, an exception, or a clean exit without a result record.
* ``invalid``: a record that fails the schema or carries a wrong nonce (forged).
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field

__all__ = ["Outcome", "classify", "decode_exit"]


@dataclass
class Outcome:
    """What the controller observed about one sandbox run.

    Attributes:
        exit_code: ``subprocess`` style (negative = killed by that signal) or ``128 + N``
            from bwrap/Docker (set ``shell_style``); ``None`` if never collected.
        shell_style: Exit codes above 128 mean "killed by signal code - 128".
        timed_out: The controller's wall clock fired.
        oom_killed: The engine reported an OOM kill (Docker, cgroup).
        record: The runner's validated record, or ``None``.
        record_error: Why the record was rejected (forged / schema), or ``None``.
        record_missing: No record was found.
        cpu_s: CPU seconds limit (to tell a CPU-limit SIGKILL from another SIGKILL).
        stderr_tail: The end of stderr (to spot ``MemoryError`` outside the runner).
    """

    exit_code: int | None = None
    shell_style: bool = False
    timed_out: bool = False
    oom_killed: bool = False
    record: dict | None = None
    record_error: str | None = None
    record_missing: bool = True
    cpu_s: float | None = None
    cpu_used_s: float | None = None
    stderr_tail: str = ""
    extra: dict = field(default_factory=dict)


def decode_exit(code: int | None, shell_style: bool) -> tuple[int | None, int | None]:
    """(exit status, signal number) from a raw exit code."""
    if code is None:
        return None, None
    if code < 0:
        return None, -code
    if shell_style and 128 < code < 128 + 65:
        return None, code - 128
    return code, None


def _signame(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def classify(o: Outcome) -> tuple[str, str | None]:
    """Map an :class:`Outcome` to ``(status, one-line error)``; ``error`` is None when ok."""
    status_code, sig = decode_exit(o.exit_code, o.shell_style)
    if o.record_error:
        return "invalid", o.record_error
    if o.oom_killed:
        return "memory", "killed by the out-of-memory killer (memory limit reached)"
    if o.timed_out:
        return "timeout", "wall-clock limit reached; the process tree was killed"
    if o.record is not None:
        status = o.record.get("status", "error")
        if status == "ok":
            return "ok", None
        return status, o.record.get("error") or f"evaluator status {status}"
    if o.cpu_s is not None and o.cpu_used_s is not None and o.cpu_used_s >= o.cpu_s - 0.05:
        # the CPU budget is spent; wrappers such as unshare(1) may hide the signal itself
        return "timeout", f"CPU-time limit reached ({o.cpu_used_s:.1f} s used)"
    if sig is not None:
        if sig == signal.SIGXCPU:
            return "timeout", "CPU-time limit reached (SIGXCPU)"
        if sig == signal.SIGKILL and o.cpu_s is not None and o.cpu_used_s is None:
            # No usage figure (bwrap/Docker hide the grandchild's rusage): a SIGKILL nobody
            # in the controller sent and no OOM flag is the hard CPU limit (epicbox's rule).
            return "timeout", "killed by SIGKILL without an OOM flag (CPU-time hard limit)"
        if sig == signal.SIGXFSZ:
            return "error", "file-size limit reached (SIGXFSZ)"
        return "killed", f"killed by {_signame(sig)}"
    if "MemoryError" in o.stderr_tail[-2000:]:
        return "memory", "MemoryError (memory limit reached)"
    if status_code not in (None, 0):
        return "error", f"sandbox exited with status {status_code} and no result"
    return "error", "no result: the program exited before the evaluator wrote its record"
