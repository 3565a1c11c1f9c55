"""The lines of ``lineage tree``: one per program, from its stored row and latest evaluation.

Stored text (ids, operators, statuses) was written by candidates and models: a line that is
not printable is rebuilt through :mod:`qdevolve.textsafe`, so no control sequence or bidi
override reaches the terminal.
"""

from __future__ import annotations

from operator import itemgetter
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
    if label == "score":
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
