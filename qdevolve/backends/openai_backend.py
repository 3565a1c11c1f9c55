"""Backend ``openai``: any OpenAI-compatible chat-completions server.

Works with hosted APIs and local servers (vLLM ``serve``, SGLang, llama.cpp, Ollama,
optillm). The API key is read at request time from the environment variable *named* by
``api_key_env``; the key itself is never stored on the backend, shown in its ``repr`` or
:meth:`OpenAIBackend.config`, or logged. Requests run concurrently up to ``concurrency``;
transient failures (429, 5xx, timeouts, dropped connections) are retried with exponential
backoff (:mod:`qdevolve.backends._retry`).

The server is treated as untrusted. Each response body is streamed under a byte cap
(``max_response_bytes``) that holds before and after gzip/deflate decoding
(:mod:`qdevolve.backends._body`); each attempt has a *total* deadline (``timeout_s``, not a
per-read timeout, so a server sending one byte a second cannot stretch it) and each request,
retries and waits included, at most ``max_request_s``; no wait (backoff or ``Retry-After``)
and no request in flight outlives the run's wall time (:meth:`OpenAIBackend.set_deadline`).
Every field of a reply is type- and range-checked (:mod:`qdevolve.backends._reply`).
``generate`` never raises for transport or server errors: a failed request yields
completions with ``text=""``, ``finish_reason="error"`` and a one-line, terminal-safe
reason in ``error``. The one exception is an unreachable server: after
``max_connection_failures`` requests in a row could not connect, ``generate`` raises
:class:`qdevolve.errors.RunAborted` naming the endpoint (never the key).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import re
import time
from typing import Any

import httpx

from qdevolve import registry
from qdevolve.backends._body import ACCEPT_ENCODING, BadEncoding, BodyTooLarge, read_capped
from qdevolve.backends._ensemble import ModelChooser, ModelSpec, parse_models
from qdevolve.backends._reply import (
    endpoint_of,
    error_detail,
    one_line,
    parse_chat_response,
    retry_after_seconds,
)
from qdevolve.backends._retry import TRANSIENT_STATUS, PermanentError, TransientError, with_retries
from qdevolve.backends.base import Completion, GenerationRequest
from qdevolve.errors import RunAborted

__all__ = ["OpenAIBackend", "parse_chat_response", "endpoint_of"]

log = logging.getLogger(__name__)


@registry.backend("openai")
class OpenAIBackend:
    """Generation through an OpenAI-compatible HTTP API.

    Args:
        api_base: Base URL up to ``/v1`` (e.g. ``http://127.0.0.1:8000/v1``).
        model: One model name; or ``models``: ``[{"name", "weight", ...overrides}]``, a
            weighted ensemble (one model drawn per request).
        api_key_env: NAME of the environment variable holding the key (none sent if unset).
        temperature, top_p, max_tokens: When set, override the request's values.
        timeout_s: Total limit per HTTP attempt (connect, send, wait and read), seconds.
        retries: Retries of a transient failure; ``retry_base_s``/``retry_max_s`` shape backoff.
        max_request_s: Total limit per request, all attempts and waits included
            (default ``2 * timeout_s``).
        max_response_bytes: Cap on each response body, encoded and decoded (default 8 MiB).
        max_error_chars: Error messages (with the server's error body) are cut to this length.
        max_connection_failures: Requests in a row that cannot connect before ``generate``
            raises :class:`~qdevolve.errors.RunAborted` (0: never).
        concurrency: Requests in flight at once.
        bandit: Choose models by UCB1 on rewards passed to :meth:`report`.
        bandit_exploration: UCB1's exploration constant ``c``.
        logprobs: Ask the server for per-token log-probs.
        native_n: Send ``n`` in one request (False: ``n`` requests, for servers without ``n``).
        seed: Seeds model choice and retry jitter.
        extra_body: Extra JSON fields sent with every request.
    """

    def __init__(
        self,
        *,
        api_base: str = "https://api.openai.com/v1",
        model: str | None = None,
        models: list[dict[str, Any]] | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        temperature: float | None = None,
        top_p: float | None = None,
        max_tokens: int | None = None,
        timeout_s: float = 120.0,
        retries: int = 3,
        max_request_s: float | None = None,
        max_response_bytes: int = 8 * 2**20,
        max_error_chars: int = 500,
        max_connection_failures: int = 5,
        retry_base_s: float = 0.5,
        retry_max_s: float = 30.0,
        concurrency: int = 8,
        bandit: bool = False,
        bandit_exploration: float = 1.0,
        logprobs: bool = False,
        native_n: bool = True,
        seed: int | None = None,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        if retries < 0:
            raise ValueError(f"retries must be >= 0, got {retries}")
        if max_request_s is not None and not max_request_s > 0:
            raise ValueError(f"max_request_s must be > 0, got {max_request_s}")
        if max_response_bytes < 1024:
            raise ValueError(f"max_response_bytes must be >= 1024, got {max_response_bytes}")
        if max_error_chars < 40:
            raise ValueError(f"max_error_chars must be >= 40, got {max_error_chars}")
        if max_connection_failures < 0:
            raise ValueError(f"max_connection_failures must be >= 0 (0: never abort), got {max_connection_failures}")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", api_key_env or ""):
            raise ValueError(
                f"api_key_env must be the NAME of an environment variable (like OPENAI_API_KEY), "
                f"not the key itself; got a value of length {len(api_key_env or '')}"
            )
        self.api_base = api_base.rstrip("/")
        self.api_key_env = api_key_env
        self.temperature, self.top_p, self.max_tokens = temperature, top_p, max_tokens
        self.timeout_s, self.retries = float(timeout_s), int(retries)
        self.retry_base_s, self.retry_max_s = float(retry_base_s), float(retry_max_s)
        self.max_request_s = float(max_request_s) if max_request_s is not None else 2.0 * self.timeout_s
        self.max_response_bytes, self.max_error_chars = int(max_response_bytes), int(max_error_chars)
        self.max_connection_failures = int(max_connection_failures)
        self.concurrency = int(concurrency)
        self.logprobs, self.native_n = bool(logprobs), bool(native_n)
        self.extra_body = dict(extra_body or {})
        self.chooser = ModelChooser(parse_models(model, models), bandit=bandit, exploration=bandit_exploration, seed=seed)
        self.policy_version: int | None = None
        self._rng = random.Random(seed)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: httpx.AsyncClient | None = None
        self._sem: asyncio.Semaphore | None = None
        self.stats = {"requests": 0, "retries": 0, "errors": 0, "prompt_tokens": 0, "completion_tokens": 0}
        self._deadline: float | None = None  # the run's wall-time end (time.time() seconds)
        self._connection_failures = 0  # requests in a row that could not connect
        self._aborted: str | None = None  # the RunAborted message, once raised

    # -- public ---------------------------------------------------------------------------
    def config(self) -> dict[str, Any]:
        """The settings to record in a run (never the key)."""
        return {
            "type": "openai",
            "api_base": self.api_base,
            "models": [vars(s).copy() for s in self.chooser.specs],
            "api_key_env": self.api_key_env,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
            "timeout_s": self.timeout_s,
            "retries": self.retries,
            "max_request_s": self.max_request_s,
            "max_response_bytes": self.max_response_bytes,
            "max_connection_failures": self.max_connection_failures,
            "concurrency": self.concurrency,
            "bandit": self.chooser.bandit,
            "logprobs": self.logprobs,
        }

    def __repr__(self) -> str:
        names = ",".join(s.name for s in self.chooser.specs)
        return f"OpenAIBackend(api_base={self.api_base!r}, models=[{names}], api_key_env={self.api_key_env!r})"

    def report(self, model: str, reward: float) -> None:
        """Reward ``model`` (child improvement over its parent) for the UCB1 bandit."""
        self.chooser.report(model, reward)

    def state(self) -> dict[str, Any]:
        """The ensemble's model-choice state (bandit statistics, RNG), JSON-safe.

        The engine stores it with the run and hands it to :meth:`restore` on resume.
        """
        return self.chooser.state()

    def restore(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state` output (see :meth:`ModelChooser.restore`)."""
        self.chooser.restore(state)

    def set_deadline(self, deadline: float | None) -> None:
        """The run's wall-time end, in ``time.time()`` seconds (``None``: no end).

        From then on no retry wait reaches past it, requests still in flight at that
        instant are abandoned (their completions fail with the reason), and requests made
        after it fail at once without being sent.
        """
        self._deadline = None if deadline is None else float(deadline)

    def load_policy(self, version: int, path: str | None) -> None:
        """Record the policy version the server now serves (the server loads the weights)."""
        self.policy_version = version

    async def generate(self, requests: list[GenerationRequest]) -> list[list[Completion]]:
        """``n`` completions per request, all requests concurrently (bounded by ``concurrency``).

        Raises:
            RunAborted: the server could not be reached by ``max_connection_failures``
                requests in a row (now or earlier).
        """
        if self._aborted is not None:
            raise RunAborted(self._aborted)
        self._bind_loop()
        return list(await asyncio.gather(*(self._one(r) for r in requests)))

    async def aclose(self) -> None:
        """Close the HTTP connection pool."""
        if self._client is not None:
            await self._client.aclose()
        self._client, self._loop, self._sem = None, None, None

    def close(self) -> None:
        """Close the HTTP pool (safe to call from sync code, with or without a running loop)."""
        client, loop = self._client, self._loop
        self._client, self._loop, self._sem = None, None, None
        if client is None:
            return
        if loop is not None and not loop.is_closed():
            if loop.is_running():
                loop.create_task(client.aclose())
                return
            loop.run_until_complete(client.aclose())
            return
        try:
            asyncio.run(client.aclose())
        except RuntimeError:  # pragma: no cover - closed loop with open transports
            pass

    # -- internals ------------------------------------------------------------------------
    def _bind_loop(self) -> None:
        """Client and semaphore belong to one event loop; rebuild them for a new loop."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._loop = loop
            self._sem = asyncio.Semaphore(self.concurrency)
            limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency)
            # A connect gets half an attempt (at least 1 s, at most 15 s), so a host that drops
            # packets is a connection failure (counted to fail fast), not a plain attempt timeout.
            connect = min(self.timeout_s, max(1.0, 0.5 * self.timeout_s), 15.0)
            timeout = httpx.Timeout(self.timeout_s, connect=connect)
            self._client = httpx.AsyncClient(timeout=timeout, limits=limits,
                                             headers={"Accept-Encoding": ACCEPT_ENCODING})

    def _payload(self, req: GenerationRequest, spec: ModelSpec, n: int) -> tuple[str, dict[str, Any]]:
        def pick(*vals: Any) -> Any:
            return next((v for v in vals if v is not None), None)

        body: dict[str, Any] = {
            "model": spec.name,
            "temperature": pick(spec.temperature, self.temperature, req.temperature),
            "top_p": pick(spec.top_p, self.top_p, req.top_p),
            "max_tokens": pick(spec.max_tokens, self.max_tokens, req.max_tokens),
        }
        if n != 1:
            body["n"] = n
        if req.seed is not None:
            body["seed"] = req.seed
        if req.stop:
            body["stop"] = list(req.stop)
        if self.logprobs:
            body["logprobs"] = True
        if req.messages is not None:
            body["messages"] = req.messages
            path = "/chat/completions"
        else:
            body["prompt"] = req.prompt or ""
            path = "/completions"
            if self.logprobs:
                body["logprobs"] = 1
        body.update(self.extra_body)
        return (spec.api_base or self.api_base).rstrip("/") + path, body

    def _headers(self, spec: ModelSpec) -> dict[str, str]:
        key = os.environ.get(spec.api_key_env or self.api_key_env)
        headers = {"Content-Type": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _deadline_mono(self, started: float) -> tuple[float, bool]:
        """The request's end as a ``time.monotonic()`` instant, and whether the run's wall time sets it."""
        end = started + self.max_request_s
        if self._deadline is not None:
            run_end = time.monotonic() + (self._deadline - time.time())
            if run_end < end:
                return run_end, True
        return end, False

    async def _post(self, url: str, body: dict[str, Any], spec: ModelSpec, deadline: float,
                    by_run: bool) -> list[Completion]:
        """One attempt, within ``timeout_s`` and before ``deadline`` (monotonic)."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise PermanentError("the run's wall time is over" if by_run else
                                 f"request gave up after max_request_s={self.max_request_s:g}s")
        budget = min(self.timeout_s, left)
        try:
            return await asyncio.wait_for(self._attempt(url, body, spec), timeout=budget)
        except asyncio.TimeoutError:
            if budget < self.timeout_s and by_run:
                raise PermanentError("abandoned at the run's wall-time deadline") from None
            raise TransientError(f"request timed out after {budget:.3g}s") from None

    async def _attempt(self, url: str, body: dict[str, Any], spec: ModelSpec) -> list[Completion]:
        assert self._client is not None
        start = time.monotonic()
        where = endpoint_of(url)
        try:
            async with self._client.stream("POST", url, content=json.dumps(body).encode(),
                                           headers=self._headers(spec)) as resp:
                try:
                    raw = await read_capped(resp, self.max_response_bytes)
                except BodyTooLarge:
                    raise PermanentError(f"HTTP {resp.status_code} reply from {where} is over "
                                         f"max_response_bytes={self.max_response_bytes}") from None
                except BadEncoding as exc:
                    raise PermanentError(f"reply from {where}: {exc}") from None
        except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
            raise PermanentError(f"cannot send to {where}: {exc}", connection=True) from None
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise TransientError(f"connection error: {type(exc).__name__}: {exc}", connection=True) from None
        except httpx.TimeoutException:
            raise TransientError(f"request timed out after {self.timeout_s:g}s") from None
        except httpx.TransportError as exc:
            raise TransientError(f"connection error: {type(exc).__name__}: {exc}") from None
        latency = time.monotonic() - start
        text = raw.decode("utf-8", errors="replace")
        del raw
        if resp.status_code != 200:
            msg = f"HTTP {resp.status_code} from {where}: {error_detail(text, self.max_error_chars)}"
            if resp.status_code in TRANSIENT_STATUS:
                raise TransientError(msg, retry_after=retry_after_seconds(resp.headers.get("retry-after")))
            raise PermanentError(msg)
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise PermanentError(f"server reply is not JSON ({exc.msg} at char {exc.pos})") from None
        except (ValueError, RecursionError) as exc:  # 5,000-digit integers, deep nesting
            raise PermanentError(f"server reply is not usable JSON ({type(exc).__name__})") from None
        return parse_chat_response(data, model=spec.name, latency_s=latency)

    def _on_retry(self, attempt: int, exc: Exception, delay: float) -> None:
        self.stats["retries"] += 1
        log.info("generation retry %d/%d in %.2fs: %s", attempt, self.retries, delay,
                 one_line(exc, self.max_error_chars))

    def _count_connection(self, exc: Exception | None, url: str) -> None:
        """Track requests in a row that could not connect; abort the run past the limit."""
        if exc is None or not getattr(exc, "connection", False):
            self._connection_failures = 0
            return
        self._connection_failures += 1
        limit = self.max_connection_failures
        if limit and self._connection_failures >= limit and self._aborted is None:
            self._aborted = one_line(
                f"the model server at {endpoint_of(url)} is unreachable: {self._connection_failures} "
                f"requests in a row could not connect (last: {exc}); start the server or fix "
                "backend.api_base", 600)
        if self._aborted is not None:
            raise RunAborted(self._aborted)

    async def _call(self, req: GenerationRequest, n: int) -> list[Completion]:
        spec = self.chooser.pick()
        url, body = self._payload(req, spec, n)
        assert self._sem is not None
        async with self._sem:
            if self._aborted is not None:
                raise RunAborted(self._aborted)
            self.stats["requests"] += 1
            start = time.monotonic()
            deadline, by_run = self._deadline_mono(start)
            failure: Exception | None = None
            try:
                comps = await with_retries(
                    lambda: self._post(url, body, spec, deadline, by_run),
                    retries=self.retries,
                    base_delay=self.retry_base_s,
                    max_delay=self.retry_max_s,
                    rng=self._rng,
                    on_retry=self._on_retry,
                    deadline=deadline,
                )
            except (TransientError, PermanentError) as exc:
                failure = exc
            self._count_connection(failure, url)
            if failure is not None:
                self.stats["errors"] += 1
                reason = one_line(failure, self.max_error_chars)
                log.warning("generation failed (model %s): %s", one_line(spec.name, 100), reason)
                err = Completion(text="", finish_reason="error", error=reason, model=spec.name,
                                 latency_s=time.monotonic() - start)
                return [_copy(err) for _ in range(n)]
        for c in comps:
            c.policy_version = self.policy_version
            c.model = spec.name
            if c.error is not None:
                self.stats["errors"] += 1
                c.error = one_line(c.error, self.max_error_chars)
            self.stats["completion_tokens"] += c.completion_tokens
        if comps:
            self.stats["prompt_tokens"] += comps[0].prompt_tokens
        return comps

    async def _one(self, req: GenerationRequest) -> list[Completion]:
        n = max(1, int(req.n))
        if self.native_n:
            comps = await self._call(req, n)
        else:
            parts = await asyncio.gather(*(self._call(req, 1) for _ in range(n)))
            comps = [c for p in parts for c in p]
        if len(comps) < n:  # the server ignored n: fill the rest with single requests
            parts = await asyncio.gather(*(self._call(req, 1) for _ in range(n - len(comps))))
            comps += [c for p in parts for c in p]
        return comps[:n]


def _copy(c: Completion) -> Completion:
    return Completion(**vars(c))
