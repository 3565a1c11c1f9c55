"""Export constants and XML text escaping, apart from the graph code so the streamed export
needs no SQLAlchemy."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["NO_POLICY", "EXPORT_FORMATS", "_xml"]

NO_POLICY = -1  # GraphML/DOT stand-in for policy_version None (the seed, offline mutators)
EXPORT_FORMATS = ("graphml", "json", "dot")

_XML_ESC = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"})
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _xml(v: Any) -> str:
    """Escaped XML text; characters XML 1.0 forbids become U+FFFD."""
    return _XML_INVALID.sub("\ufffd", str(v).translate(_XML_ESC))
