"""How values become column text: the JSON codec and the text guard.

Everything stored comes from an adversary (candidate programs, evaluator output, model
replies), so encoding never raises on odd values:

* non-finite floats: NaN is stored as ``null``, +/-inf as the strings ``"inf"``/``"-inf"``
  (JSON has no literal for them; ``docs/schema.md`` documents the convention);
* numpy scalars and arrays are unwrapped to plain values, tuples become lists;
* lone surrogates (``'\\ud800'``, not encodable as UTF-8): inside JSON they are written as
  ``\\ud800`` escapes, so the text is valid UTF-8 and decodes back to the same string; in a
  plain text column (code, error, prompt...) they, and NUL (which PostgreSQL text cannot
  hold), are replaced with U+FFFD by :func:`text`.
"""

from __future__ import annotations

import json
import math
from typing import Any

from qdevolve.textsafe import strip_surrogates

__all__ = ["dumps", "loads", "text", "finite_or_none"]

_FAST = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_ASCII = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def _clean(obj: Any) -> Any:
    if isinstance(obj, float):
        if math.isfinite(obj):
            return obj
        return None if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if hasattr(obj, "tolist") and callable(obj.tolist):  # numpy arrays and scalars
        return _clean(obj.tolist())
    if hasattr(obj, "item") and callable(obj.item):
        return _clean(obj.item())
    if obj is None or isinstance(obj, (str, int, bool)):
        return obj
    return str(obj)


def _utf8_safe(encoded: str, obj: Any) -> str:
    try:
        encoded.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: \\u-escape everything non-ASCII
        return _ASCII.encode(obj)
    return encoded


def dumps(obj: Any) -> str:
    """JSON text for a TEXT column; never raises on NaN/inf, numpy values or surrogates."""
    if not obj and isinstance(obj, dict):
        return "{}"
    try:
        return _utf8_safe(_FAST.encode(obj), obj)  # fast path: plain JSON values
    except (TypeError, ValueError):
        clean = _clean(obj)
        return _utf8_safe(_FAST.encode(clean), clean)


def loads(s: str | None, default: Any = None) -> Any:
    """Decode a JSON column (``None`` gives ``default``)."""
    if s is None:
        return default
    return json.loads(s)


def text(s: str | None) -> str | None:
    """A plain text column's value: lone surrogates and NUL replaced with U+FFFD, else unchanged."""
    if s is None:
        return None
    if "\x00" in s:
        s = s.replace("\x00", "\ufffd")
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return strip_surrogates(s)
    return s


def finite_or_none(x: float | None) -> float | None:
    """A REAL column's value: non-finite floats are stored as ``NULL``."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None
