"""Retries with exponential backoff for transient generation errors.

A request that fails with a *transient* error (HTTP 408/409/425/429/5xx, a timeout, a
dropped connection) is retried up to ``retries`` times. Attempt ``k`` (0-based) waits

    delay_k = min(max_delay, base_delay * 2**k) * u,   u ~ Uniform(0.5, 1.0)

("equal jitter", so many clients failing together do not retry in lock-step), or the
server's ``Retry-After`` seconds when it sent one (capped at ``max_delay``). With a
``deadline`` (a ``time.monotonic()`` instant: the request's total budget, or the run's
wall-time end) no wait reaches past it: a retry that could not start before the deadline
is not attempted and the last error is raised at once.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["TRANSIENT_STATUS", "TransientError", "PermanentError", "backoff_delay", "with_retries"]

T = TypeVar("T")

TRANSIENT_STATUS: frozenset[int] = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524})


class TransientError(Exception):
    """A failure worth retrying.

    Attributes:
        retry_after: The server's ``Retry-After`` hint in seconds, if any.
        connection: True when no connection could be made (refused, unresolvable host,
            connect timeout): the failures the backend counts to fail fast.
    """

    def __init__(self, message: str, retry_after: float | None = None, *, connection: bool = False) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.connection = connection


class PermanentError(Exception):
    """A failure that retrying will not fix (HTTP 400/401/404, an unparseable body...).

    ``connection`` is True when the endpoint cannot be reached at all (an unusable URL).
    """

    def __init__(self, message: str, *, connection: bool = False) -> None:
        super().__init__(message)
        self.connection = connection


def backoff_delay(attempt: int, base_delay: float, max_delay: float, rng: random.Random) -> float:
    """Seconds to wait before retry ``attempt`` (0-based): capped exponential with jitter."""
    return min(max_delay, base_delay * (2.0**attempt)) * (0.5 + 0.5 * rng.random())


async def with_retries(
    call: Callable[[], Awaitable[T]],
    *,
    retries: int,
    base_delay: float,
    max_delay: float,
    rng: random.Random,
    on_retry: Callable[[int, Exception, float], None] | None = None,
    deadline: float | None = None,
) -> T:
    """Await ``call()``; on :class:`TransientError` retry up to ``retries`` times.

    Args:
        deadline: ``time.monotonic()`` instant after which no retry starts; waits (backoff
            or ``Retry-After``) are cut so they end before it.

    Raises:
        TransientError: still failing after the last retry, or no time left for one.
        PermanentError: or any other exception ``call`` raises, at once.
    """
    attempt = 0
    while True:
        try:
            return await call()
        except TransientError as exc:
            if attempt >= retries:
                raise
            delay = backoff_delay(attempt, base_delay, max_delay, rng)
            if exc.retry_after is not None:
                delay = min(max_delay, max(0.0, exc.retry_after))
            if deadline is not None:
                left = deadline - time.monotonic()
                if delay >= left:  # the retry could not even start in time
                    raise
            if on_retry is not None:
                on_retry(attempt + 1, exc, delay)
            await asyncio.sleep(delay)
            attempt += 1
