"""Close matches for a mistyped name: ``did you mean 'workers'?`` (difflib)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["did_you_mean"]


def did_you_mean(wrong: Iterable[str], known: Iterable[str], *, cutoff: float = 0.6) -> str:
    """A phrase suggesting the closest known name for each wrong one, or ``""`` when none is close.

    >>> did_you_mean(["wrokers"], ["workers", "seed"])
    "did you mean 'workers'?"
    """
    known = [str(k) for k in known]
    pairs = []
    for w in wrong:
        match = difflib.get_close_matches(str(w), known, n=1, cutoff=cutoff)
        if not match:
            lowered = {k.lower().replace("-", "_"): k for k in known}
            key = str(w).lower().replace("-", "_")
            match = [lowered[key]] if key in lowered else []
        if match:
            pairs.append((str(w), match[0]))
    if not pairs:
        return ""
    if len(pairs) == 1:
        return f"did you mean {pairs[0][1]!r}?"
    return "did you mean " + ", ".join(f"{right!r} for {w!r}" for w, right in pairs) + "?"
