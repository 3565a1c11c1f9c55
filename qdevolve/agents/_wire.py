"""Controller side of the agent pipe protocol: length-prefixed JSON frames with deadlines.

A frame is a 4-byte big-endian length followed by that many bytes of UTF-8 JSON.  Only plain
JSON data crosses (``json.loads`` in the controller; nothing is executed or unpickled).  The
controller reads a frame's header first and refuses a frame longer than its bound without
reading the body, so an agent cannot make the controller buffer more than ``limit`` bytes.
Every read and write carries a deadline (the agent's wall clock): a silent or stuck agent
never blocks the controller.
"""

from __future__ import annotations

import errno
import json
import os
import select
import struct
import time
from typing import Any

__all__ = ["HEADER", "FrameError", "FrameTooLarge", "Closed", "Deadline", "read_frame", "write_frame", "encode"]

HEADER = struct.Struct(">I")


class FrameError(Exception):
    """The agent sent bytes that are not a valid frame of JSON."""


class FrameTooLarge(FrameError):
    """A frame's declared length exceeds the bound."""


class Closed(Exception):
    """The agent closed its end of the pipe (end of file)."""


class Deadline(Exception):
    """The deadline passed before the frame was complete."""


def encode(message: Any) -> bytes:
    """One frame holding ``message`` (plain JSON data; NaN and infinities refused)."""
    body = json.dumps(message, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
    return HEADER.pack(len(body)) + body


def _read_exact(fd: int, n: int, deadline: float) -> bytes:
    chunks, got = [], 0
    while got < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise Deadline
        ready, _, _ = select.select([fd], [], [], min(left, 1.0))
        if not ready:
            continue
        try:
            chunk = os.read(fd, min(n - got, 1 << 20))
        except InterruptedError:
            continue
        if not chunk:
            raise Closed
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_frame(fd: int, limit: int, deadline: float) -> Any:
    """Read one frame from ``fd`` and decode it.

    Raises:
        Closed: end of file before a new frame started.
        Deadline: ``deadline`` (``time.monotonic``) passed.
        FrameTooLarge: the declared length exceeds ``limit`` (the body is not read).
        FrameError: a truncated frame or a body that is not UTF-8 JSON.
    """
    head = _read_exact(fd, HEADER.size, deadline)
    (size,) = HEADER.unpack(head)
    if size > limit:
        raise FrameTooLarge(f"a message of {size} bytes exceeds the bound of {limit} bytes")
    try:
        body = _read_exact(fd, size, deadline)
    except Closed:
        raise FrameError(f"the pipe closed inside a message (header said {size} bytes)") from None
    try:
        return json.loads(body.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise FrameError(f"a message that is not UTF-8 JSON ({type(exc).__name__})") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


def write_frame(fd: int, frame: bytes, deadline: float) -> None:
    """Write ``frame`` to the non-blocking ``fd`` before ``deadline``.

    Raises:
        Deadline: the agent did not read its reply in time.
        Closed: the agent closed its end.
    """
    view = memoryview(frame)
    while view:
        left = deadline - time.monotonic()
        if left <= 0:
            raise Deadline
        _, ready, _ = select.select([], [fd], [], min(left, 1.0))
        if not ready:
            continue
        try:
            n = os.write(fd, view)
        except BlockingIOError:
            continue
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                raise Closed from None
            raise
        view = view[n:]
