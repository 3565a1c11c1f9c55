"""The lines of ``lineage tree``: one per program, from its stored row and latest evaluation.

Stored text (ids, operators, statuses) was written by candidates and models: a line that is
not printable is rebuilt through :mod:`qdevolve.textsafe`, so no control sequence or bidi
override reaches the terminal.
"""

from __future__ import annotations

from itertools import repeat
from operator import add, getitem, itemgetter
from typing import Any

from qdevolve.textsafe import terminal_safe_line

__all__ = ["label_of", "labels"]


def _safe(value: Any) -> str:
    """One-line terminal-safe text; printable strings (the common case) pass untouched."""
    text_ = value if isinstance(value, str) else str(value)
    return text_ if text_.isprintable() else terminal_safe_line(text_)


def label_of(node: tuple[Any, ...], label: str) -> str:
    """One tree line's text for a :data:`TREE_KEYS` tuple."""
    pid, gen, op, pv, status, score = node[:6]
    sc = "-" if score is None else f"{score:.6g}"
    op = op if type(op) is str and op.isprintable() else _safe(op)
    tail = "" if status == "ok" else ", unevaluated" if status is None else f", {_safe(status)}"
    short = pid[:10] if type(pid) is str and pid.isprintable() else _safe(str(pid)[:10])
    if label == "score":
        return f"{short}  score={sc}  (gen {gen}, {op}{tail})"
    if label == "operator":
        return f"{short}  {op}  (gen {gen}, score={sc}{tail})"
    policy = f"policy=v{pv}" if pv is not None else "policy=-"
    return f"{short}  {policy}  (gen {gen}, {op}, score={sc}{tail})"


def labels(rows: list[tuple[Any, ...]], evs: list[tuple[Any, ...]], label: str) -> list[str]:
    """:func:`label_of` of many programs at once: ``(seq, <qdevolve.db._tree.COLUMNS>)`` rows and
    their ``(program_id, status, score)`` evaluations.
    One format string per program; the rare line that is not printable (or a non-string id)
    is rebuilt by :func:`label_of`, which makes it terminal-safe."""
    if not set(map(type, map(itemgetter(1), rows))) <= {str}:  # a tampered id: every line exact
        return [label_of((pid, gen, op, pv, ev[1], ev[2]), label)
                for (_seq, pid, gen, op, pv, _isl), ev in zip(rows, evs, strict=True)]
    tails = {st: "" if st == "ok" else ", unevaluated" if st is None else f", {_safe(st)}"
             for st in set(map(itemgetter(1), evs))}
    out = _joined_labels(rows, evs, label, tails)
    if out is not None:
        pass
    elif label == "score":
        out = [f"{pid[:10]}  score={'-' if ev[2] is None else format(ev[2], '.6g')}  (gen {gen}, {op}{tails[ev[1]]})"
               for (_seq, pid, gen, op, _pv, _isl), ev in zip(rows, evs, strict=True)]
    elif label == "operator":
        out = [f"{pid[:10]}  {op}  (gen {gen}, score={'-' if ev[2] is None else format(ev[2], '.6g')}{tails[ev[1]]})"
               for (_seq, pid, gen, op, _pv, _isl), ev in zip(rows, evs, strict=True)]
    else:
        out = [f"{pid[:10]}  {'policy=-' if pv is None else f'policy=v{pv}'}  (gen {gen}, {op}, "
               f"score={'-' if ev[2] is None else format(ev[2], '.6g')}{tails[ev[1]]})"
               for (_seq, pid, gen, op, pv, _isl), ev in zip(rows, evs, strict=True)]
    if not "".join(out).isprintable():
        for i, ((_seq, pid, gen, op, pv, _isl), ev) in enumerate(zip(rows, evs, strict=True)):
            if not out[i].isprintable():
                out[i] = label_of((pid, gen, op, pv, ev[1], ev[2]), label)
    return out


class _Dash:
    """Formats as ``-`` (the score of an unevaluated program) under any format spec."""

    def __format__(self, spec: str) -> str:
        return "-"


_DASH, _TEN = {None: _Dash()}, slice(0, 10)
_POLICY_NONE = {"policy=vNone": "policy=-"}


def _joined_labels(rows: list[tuple[Any, ...]], evs: list[tuple[Any, ...]], label: str,
                   tails: dict[Any, str]) -> list[str] | None:
    """The lines of :func:`labels` built by C passes: the pieces of every line interleaved,
    joined, and split at the newlines; ``None`` when an operator or policy version is not of
    the stored type, or a piece holds a newline (the per-line format then does it)."""
    n = len(rows)
    ops = list(map(itemgetter(3), rows))
    if not set(map(type, ops)) <= {str}:
        return None
    scores = list(map(itemgetter(2), evs))
    short = map(getitem, map(itemgetter(1), rows), repeat(_TEN))
    sc = map(format, map(_DASH.get, scores, scores), repeat(".6g"))
    gens = map(str, map(itemgetter(2), rows))
    ends = {st: f"{t})\n" for st, t in tails.items()}
    tail = map(ends.__getitem__, map(itemgetter(1), evs))
    if label == "score":
        pieces: tuple[Any, ...] = (short, "  score=", sc, "  (gen ", gens, ", ", ops, tail)
    elif label == "operator":
        pieces = (short, "  ", ops, "  (gen ", gens, ", score=", sc, tail)
    else:
        pvs = list(map(itemgetter(4), rows))
        if not set(map(type, pvs)) <= {int, type(None)}:
            return None
        policy = list(map(add, repeat("policy=v"), map(str, pvs)))
        pieces = (short, "  ", map(_POLICY_NONE.get, policy, policy), "  (gen ", gens, ", ", ops, ", score=",
                  sc, tail)
    k = len(pieces)
    parts: list[Any] = [None] * (k * n)
    for i, piece in enumerate(pieces):
        parts[i::k] = repeat(piece, n) if type(piece) is str else piece
    out = "".join(parts).split("\n")
    out.pop()
    return out if len(out) == n else None
