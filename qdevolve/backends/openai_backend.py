"""Backend ``openai``: any OpenAI-compatible chat-completions server.

Works with hosted APIs and local servers (vLLM ``serve``, SGLang, llama.cpp, Ollama,
optillm). The API key is read at request time from the environment variable *named* by
``api_key_env``; the key itself is never stored on the backend, shown in its ``repr`` or
:meth:`OpenAIBackend.config`, or logged. Requests run concurrently up to ``concurrency``,
each under a hard ``timeout_s``; transient failures (429, 5xx, timeouts, dropped
connections) are retried with exponential backoff (:mod:`qdevolve.backends._retry`).
``generate`` never raises for transport or server errors: a failed request yields
completions with ``text=""``, ``finish_reason="error"`` and the reason in ``error``.
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
from qdevolve.backends._ensemble import ModelChooser, ModelSpec, parse_models
from qdevolve.backends._retry import TRANSIENT_STATUS, PermanentError, TransientError, with_retries
from qdevolve.backends.base import Completion, GenerationRequest

__all__ = ["OpenAIBackend", "parse_chat_response"]

log = logging.getLogger(__name__)
_TOKEN_ID = re.compile(r"^token_id:(\d+)$")


def _logprobs_of(choice: dict[str, Any]) -> tuple[list[float], list[int]]:
    """Per-token log-probs (and token ids when the server encodes them) of one choice.

    Reads the chat format (``logprobs.content[i].logprob``) and the completions format
    (``logprobs.token_logprobs[i]``). vLLM with ``return_tokens_as_token_ids`` names tokens
    ``token_id:<id>``; other servers give only the token text, so ids stay empty.
    """
    block = choice.get("logprobs") or {}
    if isinstance(block.get("token_logprobs"), list):  # the /completions format
        lps = [float(x) if x is not None else 0.0 for x in block["token_logprobs"]]
        toks = [_TOKEN_ID.match(str(t)) for t in block.get("tokens") or []]
        ids = [int(m.group(1)) for m in toks if m] if toks and all(toks) else []
        return lps, ids
    content = block.get("content") or []
    lps = [float(t.get("logprob", 0.0)) for t in content if isinstance(t, dict)]
    ids = []
    for t in content:
        m = _TOKEN_ID.match(str(t.get("token", ""))) if isinstance(t, dict) else None
        if m is None:
            return lps, []
        ids.append(int(m.group(1)))
    return lps, ids


def parse_chat_response(body: dict[str, Any], *, model: str, latency_s: float) -> list[Completion]:
    """Our completions from a ``/chat/completions`` (or ``/completions``) response body.

    Prompt tokens are the request's (the same for every choice); completion tokens are the
    choice's own log-prob count when given, else the usage total split evenly.

    Raises:
        PermanentError: the body has no ``choices`` list.
    """
    choices = body.get("choices")
    if not isinstance(choices, list):
        raise PermanentError(f"server reply has no 'choices' list (keys: {sorted(body)[:8]})")
    usage = body.get("usage") or {}
    prompt_tokens = int(usage.get("prompt_tokens") or 0)
    total_completion = int(usage.get("completion_tokens") or 0)
    out = []
    for choice in choices:
        msg = choice.get("message") or {}
        text = msg.get("content") if isinstance(msg, dict) else None
        if text is None:
            text = choice.get("text") or ""
        lps, ids = _logprobs_of(choice)
        out.append(
            Completion(
                text=str(text),
                token_ids=ids,
                logprobs=lps,
                finish_reason=choice.get("finish_reason") or "stop",
                prompt_tokens=prompt_tokens,
                completion_tokens=len(lps) if lps else total_completion // max(1, len(choices)),
                model=body.get("model") or model,
                latency_s=latency_s,
            )
        )
    return out


@registry.backend("openai")
class OpenAIBackend:
    """Generation through an OpenAI-compatible HTTP API.

    Args:
        api_base: Base URL up to ``/v1`` (e.g. ``http://127.0.0.1:8000/v1``).
        model: One model name; or ``models``: ``[{"name", "weight", ...overrides}]``, a
            weighted ensemble (one model drawn per request).
        api_key_env: NAME of the environment variable holding the key (none sent if unset).
        temperature, top_p, max_tokens: When set, override the request's values.
        timeout_s: Hard limit per HTTP request, seconds.
        retries: Retries of a transient failure; ``retry_base_s``/``retry_max_s`` shape backoff.
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

    def load_policy(self, version: int, path: str | None) -> None:
        """Record the policy version the server now serves (the server loads the weights)."""
        self.policy_version = version

    async def generate(self, requests: list[GenerationRequest]) -> list[list[Completion]]:
        """``n`` completions per request, all requests concurrently (bounded by ``concurrency``)."""
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
            self._client = httpx.AsyncClient(timeout=httpx.Timeout(self.timeout_s), limits=limits)

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

    async def _post(self, url: str, body: dict[str, Any], spec: ModelSpec) -> list[Completion]:
        assert self._client is not None
        start = time.monotonic()
        try:
            resp = await asyncio.wait_for(
                self._client.post(url, content=json.dumps(body).encode(), headers=self._headers(spec)),
                timeout=self.timeout_s,
            )
        except (asyncio.TimeoutError, httpx.TimeoutException):
            raise TransientError(f"request timed out after {self.timeout_s:g}s") from None
        except httpx.TransportError as exc:
            raise TransientError(f"connection error: {type(exc).__name__}: {exc}") from None
        latency = time.monotonic() - start
        text = resp.content.decode("utf-8", errors="replace")
        if resp.status_code != 200:
            snippet = text[:200].replace("\n", " ")
            msg = f"HTTP {resp.status_code} from {url}: {snippet}"
            if resp.status_code in TRANSIENT_STATUS:
                retry_after = resp.headers.get("retry-after")
                try:
                    hint = float(retry_after) if retry_after is not None else None
                except ValueError:
                    hint = None
                raise TransientError(msg, retry_after=hint)
            raise PermanentError(msg)
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise PermanentError(f"server reply is not JSON ({exc.msg} at char {exc.pos})") from None
        if not isinstance(data, dict):
            raise PermanentError(f"server reply is JSON {type(data).__name__}, not an object")
        return parse_chat_response(data, model=spec.name, latency_s=latency)

    def _on_retry(self, attempt: int, exc: Exception, delay: float) -> None:
        self.stats["retries"] += 1
        log.info("generation retry %d/%d in %.2fs: %s", attempt, self.retries, delay, exc)

    async def _call(self, req: GenerationRequest, n: int) -> list[Completion]:
        spec = self.chooser.pick()
        url, body = self._payload(req, spec, n)
        assert self._sem is not None
        async with self._sem:
            self.stats["requests"] += 1
            start = time.monotonic()
            try:
                comps = await with_retries(
                    lambda: self._post(url, body, spec),
                    retries=self.retries,
                    base_delay=self.retry_base_s,
                    max_delay=self.retry_max_s,
                    rng=self._rng,
                    on_retry=self._on_retry,
                )
            except (TransientError, PermanentError) as exc:
                self.stats["errors"] += 1
                log.warning("generation failed (model %s): %s", spec.name, exc)
                err = Completion(text="", finish_reason="error", error=str(exc), model=spec.name,
                                 latency_s=time.monotonic() - start)
                return [_copy(err) for _ in range(n)]
        for c in comps:
            c.policy_version = self.policy_version
            c.model = spec.name
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
