"""Turning an untrusted ``/chat/completions`` (or ``/completions``) reply into completions.

Every field is type- and range-checked before it reaches a :class:`Completion`, because the
server is untrusted and what it sends ends up in the store: a ``finish_reason`` that is an
object, token counts above 2^63 or below 0, a lone surrogate in the text, ``choices`` that
are missing or not objects. A problem with the body as a whole raises
:class:`~qdevolve.backends._retry.PermanentError`; a problem with one choice makes that
choice an error completion (``finish_reason="error"``, the reason in ``error``), so the
engine stores a failed child with a one-line reason. Lone surrogates in the text are
replaced with U+FFFD (the rest of the reply is kept).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from qdevolve.backends._retry import PermanentError
from qdevolve.backends.base import Completion
from qdevolve.textsafe import strip_surrogates, terminal_safe_line

__all__ = ["MAX_TOKEN_COUNT", "one_line", "endpoint_of", "error_detail", "retry_after_seconds", "parse_chat_response"]

MAX_TOKEN_COUNT = 10**9  # no request uses a billion tokens; larger counts are corrupt
_TOKEN_ID = re.compile(r"^token_id:(\d{1,10})$")
_FINISH = re.compile(r"^[A-Za-z0-9_.:-]{1,40}$")


def one_line(text: object, limit: int = 500) -> str:
    """``text`` as one terminal-safe line of at most ``limit`` characters."""
    s = terminal_safe_line(strip_surrogates(str(text)))
    return s if len(s) <= limit else s[: max(0, limit - 1)] + "…"


class _BadChoice(Exception):
    """One choice is malformed; the message names the field."""


def _kind(v: Any) -> str:
    return "null" if v is None else {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(v), type(v).__name__)


def _count(value: Any, where: str) -> int:
    """A token count: an integer in ``[0, MAX_TOKEN_COUNT]`` (``null`` or absent = 0)."""
    if value is None:
        return 0
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _BadChoice(f"{where} is {_kind(value)}, not an integer")
    if not 0 <= value <= MAX_TOKEN_COUNT:
        shown = str(value) if abs(value) < 10**30 else f"~1e{len(str(abs(value))) - 1}"
        raise _BadChoice(f"{where} = {shown} is outside [0, {MAX_TOKEN_COUNT}]")
    return value


def _text(value: Any, where: str) -> str:
    """Message content: a string, ``null`` (no text) or a list of ``{"type": "text", "text"}`` parts."""
    if value is None:
        return ""
    if isinstance(value, list):  # the content-parts form some servers use
        parts = []
        for i, p in enumerate(value):
            if not isinstance(p, dict) or not isinstance(p.get("text", ""), str):
                raise _BadChoice(f"{where}[{i}] is not a text part")
            parts.append(p.get("text", ""))
        value = "".join(parts)
    if not isinstance(value, str):
        raise _BadChoice(f"{where} is {_kind(value)}, not a string")
    return strip_surrogates(value)


def _finish_reason(value: Any) -> str:
    if value is None:
        return "stop"
    if not isinstance(value, str):
        raise _BadChoice(f"finish_reason is {_kind(value)}, not a string")
    if not _FINISH.match(value):
        raise _BadChoice(f"finish_reason {one_line(value, 40)!r} is not a short identifier")
    return value


def _logprob(x: Any, where: str) -> float:
    if x is None:
        return 0.0
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x > 1e-6:
        raise _BadChoice(f"{where} is {one_line(repr(x), 40)}, not a finite log-probability <= 0")
    return float(min(0.0, x))


def _logprobs_of(choice: dict[str, Any]) -> tuple[list[float], list[int]]:
    """Per-token log-probs (and token ids when the server encodes them) of one choice.

    Reads the chat format (``logprobs.content[i].logprob``) and the completions format
    (``logprobs.token_logprobs[i]``). vLLM with ``return_tokens_as_token_ids`` names tokens
    ``token_id:<id>``; other servers give only the token text, so ids stay empty.
    """
    block = choice.get("logprobs")
    if block is None:
        return [], []
    if not isinstance(block, dict):
        raise _BadChoice(f"logprobs is {_kind(block)}, not an object")
    if block.get("token_logprobs") is not None:  # the /completions format
        values, tokens = block["token_logprobs"], block.get("tokens") or []
        if not isinstance(values, list) or not isinstance(tokens, list):
            raise _BadChoice("logprobs.token_logprobs / logprobs.tokens are not lists")
        lps = [_logprob(x, f"logprobs.token_logprobs[{i}]") for i, x in enumerate(values)]
        matches = [_TOKEN_ID.match(t) if isinstance(t, str) else None for t in tokens]
        ids = [int(m.group(1)) for m in matches if m] if matches and all(matches) else []
        return lps, ids
    content = block.get("content") or []
    if not isinstance(content, list):
        raise _BadChoice(f"logprobs.content is {_kind(content)}, not a list")
    lps, ids = [], []
    for i, t in enumerate(content):
        if not isinstance(t, dict):
            raise _BadChoice(f"logprobs.content[{i}] is {_kind(t)}, not an object")
        lps.append(_logprob(t.get("logprob", 0.0), f"logprobs.content[{i}].logprob"))
        tok = t.get("token")
        m = _TOKEN_ID.match(tok) if isinstance(tok, str) else None
        ids.append(int(m.group(1)) if m else -1)
    return lps, ids if ids and min(ids) >= 0 else []


def _choice(choice: Any, index: int) -> tuple[str, str, list[float], list[int]]:
    if not isinstance(choice, dict):
        raise _BadChoice(f"choices[{index}] is {_kind(choice)}, not an object")
    msg = choice.get("message")
    if msg is not None and not isinstance(msg, dict):
        raise _BadChoice(f"choices[{index}].message is {_kind(msg)}, not an object")
    if msg is not None and "content" in msg:
        text = _text(msg["content"], f"choices[{index}].message.content")
    else:
        text = _text(choice.get("text"), f"choices[{index}].text")
    finish = _finish_reason(choice.get("finish_reason"))
    lps, ids = _logprobs_of(choice)
    return text, finish, lps, ids


def parse_chat_response(body: Any, *, model: str, latency_s: float) -> list[Completion]:
    """Our completions from a ``/chat/completions`` (or ``/completions``) response body.

    Prompt tokens are the request's (the same for every choice); completion tokens are the
    choice's own log-prob count when given, else the usage total split evenly.

    Raises:
        PermanentError: the body is not an object, carries an ``error``, has no non-empty
            ``choices`` list, or its ``usage`` is malformed.
    """
    if not isinstance(body, dict):
        raise PermanentError(f"server reply is JSON {_kind(body)}, not an object")
    if body.get("error") is not None and "choices" not in body:
        err = body["error"]
        detail = err.get("message", err) if isinstance(err, dict) else err
        raise PermanentError(f"server reply is an error: {one_line(detail, 200)}")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        what = ("an empty 'choices' list" if isinstance(choices, list) else "no 'choices' list"
                if choices is None else f"'choices' that is {_kind(choices)}, not a list")
        raise PermanentError(f"server reply has {what} (keys: {one_line(sorted(map(str, body))[:8], 120)})")
    usage = body.get("usage")
    if usage is not None and not isinstance(usage, dict):
        raise PermanentError(f"server reply 'usage' is {_kind(usage)}, not an object")
    usage = usage or {}
    try:
        prompt_tokens = _count(usage.get("prompt_tokens"), "usage.prompt_tokens")
        total_completion = _count(usage.get("completion_tokens"), "usage.completion_tokens")
    except _BadChoice as exc:
        raise PermanentError(f"server reply: {exc}") from None
    out = []
    for i, choice in enumerate(choices):
        try:
            text, finish, lps, ids = _choice(choice, i)
        except _BadChoice as exc:
            out.append(Completion(text="", finish_reason="error", error=f"malformed reply: {exc}",
                                  model=model, latency_s=latency_s))
            continue
        out.append(Completion(
            text=text, token_ids=ids, logprobs=lps, finish_reason=finish, prompt_tokens=prompt_tokens,
            completion_tokens=len(lps) if lps else total_completion // len(choices),
            model=model, latency_s=latency_s))
    return out


def endpoint_of(url: str) -> str:
    """``url`` without user, password, query or fragment: safe to print and store."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if parts.port is not None:
            host = f"{host}:{parts.port}"
        return one_line(urlunsplit((parts.scheme, host, parts.path, "", "")), 200)
    except ValueError:
        return "<unparseable URL>"


def error_detail(text: str, limit: int) -> str:
    """The ``error.message`` of a JSON error body, else the body's start (both cut to ``limit``)."""
    if len(text) < 100_000:
        try:
            err = json.loads(text).get("error")
            msg = err.get("message") if isinstance(err, dict) else err
            if isinstance(msg, str):
                return msg[:limit]
        except (ValueError, RecursionError, AttributeError):
            pass
    return text[:limit]


def retry_after_seconds(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header given in seconds (dates and junk: ``None``)."""
    try:
        hint = float(value) if value is not None else None
    except ValueError:
        return None
    return hint if hint is not None and 0.0 <= hint < 1e9 else None
