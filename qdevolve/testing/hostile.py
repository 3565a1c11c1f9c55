"""Hostile OpenAI-compatible replies, for tests that a run survives a malicious model server.

Each mode of :class:`HostileScript` answers every request with one kind of attack on the
client (the modes of the issue "model replies are just as hostile"):

======================  =======================================================================
``endless_stream``      HTTP 200 whose body never ends (chunked, as fast as the client reads)
``gzip_bomb``           a ~1 MB gzip body that inflates to ``bomb_bytes`` (default 1 GiB) of zeros
``slow_loris``          a valid reply sent one byte every ``loris_delay_s`` seconds
``finish_reason_object`` a valid reply whose ``finish_reason`` is a JSON object
``huge_tokens``         ``usage`` token counts above 2^63
``negative_tokens``     ``usage`` token counts below 0
``lone_surrogate``      a valid diff with a lone surrogate (``\\ud800``) in its text
``reply_50mb``          a well-formed reply whose content is ``big_bytes`` (50 MB), chunked
``escape_error``        HTTP 400 whose error body carries terminal escapes (OSC 52, ``ESC[6n``,
                        screen clear, bidi override, CR)
``no_choices``          a 200 reply without ``choices``
``odd_choices``         ``choices`` that are not objects
``deep_json``           100,000 nested JSON arrays
``fixed_code_attack``   a valid diff that ends the EVOLVE-BLOCK with a decorator, replacing the
                        fixed function below the block
======================  =======================================================================

The valid text the modes wrap comes from ``valid`` (default
:class:`~qdevolve.testing.scripts.ScriptedModel`), so a client that defends itself still
gets a usable child from ``lone_surrogate``.
"""

from __future__ import annotations

import functools
import itertools
import json
import time
import zlib
from collections.abc import Callable, Iterator
from typing import Any

from qdevolve.testing.scripted_server import Reply

__all__ = ["HOSTILE_MODES", "HostileScript", "ESCAPES", "gzip_bomb"]

HOSTILE_MODES: tuple[str, ...] = (
    "endless_stream",
    "gzip_bomb",
    "slow_loris",
    "finish_reason_object",
    "huge_tokens",
    "negative_tokens",
    "lone_surrogate",
    "reply_50mb",
    "escape_error",
    "no_choices",
    "odd_choices",
    "deep_json",
    "fixed_code_attack",
)

# OSC 52 clipboard write, a device-status query (types into the shell), screen clear,
# cursor home, a bidi override, CR and NUL.
ESCAPES = "\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b[6n\x1b[2J\x1b[H\u202eevil\r\x00"


@functools.lru_cache(maxsize=4)
def gzip_bomb(total_bytes: int) -> bytes:
    """A gzip body inflating to ``total_bytes`` zero bytes (concatenated members of <= 64 MiB)."""
    member_size = min(total_bytes, 64 * 2**20)
    c = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = bytes(min(member_size, 2**20))
    parts, left = [], member_size
    while left > 0:
        parts.append(c.compress(zeros[: min(left, len(zeros))]))
        left -= len(zeros)
    parts.append(c.flush())
    member = b"".join(parts)
    return member * max(1, total_bytes // member_size)


def _body(req: dict[str, Any], content: Any, *, finish_reason: Any = "stop",
          usage: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-hostile", "object": "chat.completion", "created": int(time.time()),
        "model": req.get("model") or "hostile",
        "choices": [{"index": 0, "finish_reason": finish_reason,
                     "message": {"role": "assistant", "content": content}}],
        "usage": usage if usage is not None else {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
    }


class HostileScript:
    """Replies of one hostile kind (see the module docstring).

    Args:
        mode: One of :data:`HOSTILE_MODES`.
        valid: Script giving the valid text wrapped by some modes (default ``ScriptedModel``).
        bomb_bytes: Inflated size of ``gzip_bomb``.
        big_bytes: Content size of ``reply_50mb``.
        loris_delay_s: Seconds between the bytes of ``slow_loris``.
    """

    def __init__(self, mode: str, *, valid: Callable[[dict[str, Any]], Any] | None = None,
                 bomb_bytes: int = 2**30, big_bytes: int = 50 * 10**6, loris_delay_s: float = 1.0) -> None:
        if mode not in HOSTILE_MODES:
            raise ValueError(f"unknown hostile mode {mode!r}; modes are {', '.join(HOSTILE_MODES)}")
        if valid is None:
            from qdevolve.testing.scripts import ScriptedModel

            valid = ScriptedModel(seed=0)
        self.mode, self.valid = mode, valid
        self.bomb_bytes, self.big_bytes, self.loris_delay_s = bomb_bytes, big_bytes, loris_delay_s
        self.calls = 0

    def _valid_text(self, req: dict[str, Any]) -> str:
        r = self.valid(req)
        return r.text if isinstance(r, Reply) else str(r)

    def __call__(self, req: dict[str, Any]) -> Reply:
        mode = self.mode
        if mode == "endless_stream":
            head = b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": "'

            def endless() -> Iterator[bytes]:
                yield head
                yield from itertools.repeat(b"A" * 65536)

            return Reply(stream=endless)
        if mode == "gzip_bomb":
            return Reply(raw=gzip_bomb(self.bomb_bytes), headers={"Content-Encoding": "gzip"})
        if mode == "slow_loris":
            data = json.dumps(_body(req, self._valid_text(req))).encode()
            return Reply(stream=lambda: (data[i:i + 1] for i in range(len(data))),
                         chunk_delay_s=self.loris_delay_s, headers={"Content-Length": str(len(data))})
        if mode == "finish_reason_object":
            body = _body(req, self._valid_text(req), finish_reason={"type": "stop", "nested": [1, {"a": None}]})
            return Reply(raw=json.dumps(body).encode())
        if mode in ("huge_tokens", "negative_tokens"):
            n = 2**64 + 7 if mode == "huge_tokens" else -5
            usage = {"prompt_tokens": n, "completion_tokens": n, "total_tokens": 2 * n}
            return Reply(raw=json.dumps(_body(req, self._valid_text(req), usage=usage)).encode())
        if mode == "lone_surrogate":
            text = self._valid_text(req).replace("\n>>>>>>> REPLACE", "  # \ud800 odd\n>>>>>>> REPLACE", 1)
            text = "Note \udfff first.\n" + text
            return Reply(raw=json.dumps(_body(req, text)).encode())  # ensure_ascii: "\ud800" escapes
        if mode == "reply_50mb":
            head = json.dumps(_body(req, "@@"))
            pre, post = head.split("@@")
            size = self.big_bytes

            def big() -> Iterator[bytes]:
                yield pre.encode()
                block = b"B" * 2**20
                for start in range(0, size, len(block)):
                    yield block[: min(len(block), size - start)]
                yield post.encode()

            return Reply(stream=big)
        if mode == "escape_error":
            self.calls += 1
            if self.calls % 2 == 0:  # every other one: JSON whose message decodes to raw escapes
                body = {"error": {"message": f"bad request {ESCAPES} second line\nthird", "type": "x"}}
                return Reply(status=400, raw=json.dumps(body).encode())
            return Reply(status=400, raw=f"bad request {ESCAPES} second line\nthird".encode())
        if mode == "no_choices":
            return Reply(raw=json.dumps({"id": "x", "object": "chat.completion", "model": "m"}).encode())
        if mode == "odd_choices":
            return Reply(raw=json.dumps({"choices": [42, "text", None, {"message": "a string"}]}).encode())
        if mode == "fixed_code_attack":
            return Reply(text=_decorator_attack(req))
        return Reply(raw=b"[" * 100_000 + b"]" * 100_000)  # deep_json


def _decorator_attack(req: dict[str, Any]) -> str:
    """A diff whose replacement ends the block with ``@lambda f: ...``, which then decorates
    (replaces) the first fixed function after the block."""
    from qdevolve.mutation.blocks import find_blocks
    from qdevolve.testing.scripts import _current_program, prompt_of

    code = _current_program(prompt_of(req)) or ""
    try:
        blocks = find_blocks(code)
    except ValueError:
        blocks = []
    body = code[blocks[-1].start:blocks[-1].end] if blocks else ""
    lines = [ln for ln in body.split("\n") if ln.strip()]
    if not lines or body.split("\n").count(lines[-1]) != 1:
        return "I have no edit."
    last = lines[-1]
    return (f"A faster fixed step:\n<<<<<<< SEARCH\n{last}\n=======\n{last}\n"
            f"@lambda f: (lambda *args, **kwargs: [0.2] * len(args[0]))\n>>>>>>> REPLACE\n")
