"""Server-side rendering helpers: highlighted code and diffs, artifact tails, policy rows.

Pygments escapes every character of the text it highlights (``&``, ``<``, ``>``, quotes), so
its HTML output carries program text as text; it emits class names only (no inline styles,
which the page's Content-Security-Policy would refuse), styled by ``/static/pygments.css``.
"""

from __future__ import annotations

import difflib
import functools
import math
from typing import Any

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import DiffLexer, TextLexer, get_lexer_by_name
from pygments.util import ClassNotFound

from qdevolve.serve import queries as Q
from qdevolve.serve.db import ReadOnlyDB
from qdevolve.textsafe import strip_surrogates

__all__ = ["highlight_code", "highlight_diff", "tail", "pygments_css", "policy_view", "ARTIFACT_TAIL"]

ARTIFACT_TAIL = 4000  # characters of each artifact shown (its end: where tracebacks end)
_FORMATTER = HtmlFormatter(cssclass="hl", linenos="table", wrapcode=True)
_DIFF_FORMATTER = HtmlFormatter(cssclass="hl", wrapcode=True)


def highlight_code(code: str, language: str | None) -> str:
    """HTML of ``code`` highlighted as ``language`` (plain text when Pygments has no lexer)."""
    try:
        lexer = get_lexer_by_name(language or "python")
    except ClassNotFound:
        lexer = TextLexer()
    return highlight(strip_surrogates(code), lexer, _FORMATTER)


def highlight_diff(old: str, new: str, old_name: str, new_name: str) -> str:
    """HTML of the unified diff ``old`` -> ``new`` (3 lines of context)."""
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                 fromfile=old_name, tofile=new_name, n=3)
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines) or "(no change)\n"
    return highlight(strip_surrogates(text), DiffLexer(), _DIFF_FORMATTER)


def tail(text: Any, limit: int = ARTIFACT_TAIL) -> tuple[str, int]:
    """The last ``limit`` characters of ``text`` (non-strings as JSON-ish text) and how many were cut."""
    s = text if isinstance(text, str) else repr(text)
    cut = max(0, len(s) - limit)
    return strip_surrogates(s[cut:]), cut


@functools.lru_cache(maxsize=1)
def pygments_css() -> str:
    """The stylesheet for highlighted code (light theme)."""
    return _FORMATTER.get_style_defs(".hl")


_ALIASES = {"loss": ("loss", "train/loss"), "kl": ("kl", "kl_div", "train/kl"),
            "entropy": ("entropy", "train/entropy"), "D_n": ("D_n", "d_n", "Dn", "distinct_n"),
            "pass@1": ("pass@1", "pass_at_1", "pass1")}


def _metric(metrics: dict[str, Any], name: str) -> float | None:
    for key in _ALIASES[name]:
        v = metrics.get(key) if isinstance(metrics, dict) else None
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            return float(v)
    return None


def policy_view(db: ReadOnlyDB, run: dict[str, Any]) -> dict[str, Any]:
    """Per policy version: loss, KL, entropy, D_n, pass@1 and the programs it produced.

    pass@1 is the version's recorded ``pass@1`` metric when the trainer wrote one, else the
    fraction of the version's rollouts whose reward reaches the run's ``correct_threshold``
    (``train.correct_threshold``, default 1.0): the unbiased pass@k estimator of Chen et al.
    (2021) at k = 1 is exactly that fraction.
    """
    versions = Q.policy_versions(db, run["id"])
    produced = Q.programs_per_version(db, run["id"])
    train = (run.get("config") or {}).get("train") or {}
    threshold = float(train.get("correct_threshold", 1.0)) if isinstance(train, dict) else 1.0
    rewards: dict[int, list[float]] = {}
    for v, r in Q.rollout_rewards(db, run["id"]):
        if v is not None and r is not None:
            rewards.setdefault(int(v), []).append(float(r))
    rows = []
    for pv in versions:
        m = pv["metrics"] if isinstance(pv["metrics"], dict) else {}
        v = int(pv["version"])
        rs = rewards.get(v, [])
        p1 = _metric(m, "pass@1")
        source = "metric" if p1 is not None else "rollouts"
        if p1 is None and rs:
            p1 = sum(r >= threshold for r in rs) / len(rs)
        prod = produced.get(v, {"programs": 0, "ok": 0, "best_score": None})
        rows.append({"version": v, "parent_version": pv.get("parent_version"), "objective": pv.get("objective"),
                     "step": pv.get("step"), "created_at": pv.get("created_at"),
                     "loss": _metric(m, "loss"), "kl": _metric(m, "kl"), "entropy": _metric(m, "entropy"),
                     "D_n": _metric(m, "D_n"), "pass@1": p1, "pass@1_source": source if p1 is not None else None,
                     "rollouts": len(rs), **prod,
                     "metrics": {k: v2 for k, v2 in m.items() if isinstance(v2, (int, float, str, bool))}})
    return {"run_id": run["id"], "correct_threshold": threshold, "versions": rows,
            "joined": bool(rows) or bool(produced)}
