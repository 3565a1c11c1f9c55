"""Reading an HTTP response body under a byte cap that holds before and after decompression.

A model server is untrusted: it may stream without end, declare a huge ``Content-Length``,
or send a small gzip body that inflates to gigabytes (a "gzip bomb"). :func:`read_capped`
streams the raw (still encoded) bytes, stops as soon as either the encoded bytes or the
decoded bytes pass ``cap``, and inflates with an output limit per step
(``zlib.decompressobj().decompress(data, max_length)``), so no more than ``cap + 1`` decoded
bytes are ever held. Only ``identity``, ``gzip`` and ``deflate`` are accepted (the client
asks for no other encoding); anything else is refused.
"""

from __future__ import annotations

import zlib
from typing import Any

__all__ = ["BodyTooLarge", "BadEncoding", "ACCEPT_ENCODING", "read_capped"]

ACCEPT_ENCODING = "gzip, deflate"


class BodyTooLarge(Exception):
    """The body passed the byte cap (encoded or decoded)."""


class BadEncoding(Exception):
    """The body's ``Content-Encoding`` is unsupported or its compressed data is corrupt."""


class _Inflater:
    """Incremental gzip/deflate decoding with a bound on the output of each step."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        # 16 + MAX_WBITS: gzip header; MAX_WBITS: zlib (RFC 1950); -MAX_WBITS: raw deflate.
        self._wbits = 16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS
        self._d = zlib.decompressobj(self._wbits)
        self._started = False

    def feed(self, data: bytes, room: int) -> bytes:
        """Decoded bytes of ``data``; raises :class:`BodyTooLarge` past ``room`` bytes."""
        out = bytearray()
        while data:
            try:
                piece = self._d.decompress(data, room - len(out) + 1)
            except zlib.error as exc:
                if self.encoding == "deflate" and not self._started and self._wbits > 0:
                    self._wbits = -zlib.MAX_WBITS  # some servers send raw deflate
                    self._d = zlib.decompressobj(self._wbits)
                    continue
                raise BadEncoding(f"the {self.encoding} body is corrupt ({exc})") from None
            self._started = True
            out += piece
            if len(out) > room:
                raise BodyTooLarge
            data = self._d.unconsumed_tail
            if self._d.eof and self._d.unused_data:  # a concatenated gzip member follows
                data = self._d.unused_data
                self._d = zlib.decompressobj(self._wbits)
            elif not piece and data:  # no progress: cannot happen with a sane zlib
                raise BadEncoding(f"the {self.encoding} body does not decode")
        return bytes(out)

    def finish(self, room: int) -> bytes:
        tail = self._d.flush()
        if len(tail) > room:
            raise BodyTooLarge
        return tail


def _decoder(encoding: str) -> _Inflater | None:
    codings = [c.strip().lower() for c in encoding.split(",") if c.strip()]
    codings = [c for c in codings if c != "identity"]
    if not codings:
        return None
    if len(codings) == 1 and codings[0] in ("gzip", "x-gzip", "deflate"):
        return _Inflater("deflate" if codings[0] == "deflate" else "gzip")
    raise BadEncoding(f"unsupported Content-Encoding {encoding[:40]!r} (only gzip or deflate)")


async def read_capped(resp: Any, cap: int) -> bytes:
    """The decoded body of a streamed ``httpx.Response``, at most ``cap`` bytes.

    Raises:
        BodyTooLarge: the declared length, the encoded bytes or the decoded bytes exceed ``cap``.
        BadEncoding: an unsupported or corrupt content encoding.
    """
    declared = resp.headers.get("content-length", "")
    if declared.strip().isdigit() and int(declared) > cap:
        raise BodyTooLarge
    inflater = _decoder(resp.headers.get("content-encoding", ""))
    out = bytearray()
    raw_seen = 0
    async for chunk in resp.aiter_raw():
        raw_seen += len(chunk)
        if raw_seen > cap:
            raise BodyTooLarge
        out += chunk if inflater is None else inflater.feed(chunk, cap - len(out))
        if len(out) > cap:
            raise BodyTooLarge
    if inflater is not None:
        out += inflater.finish(cap - len(out))
    return bytes(out)
