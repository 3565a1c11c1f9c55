"""The Pareto front as a table: the run summary and ``qdevolve archive stats`` print it.

Reads the ``front`` and ``objectives`` that a ``pareto`` archive's ``stats()`` reports (see
:mod:`qdevolve.archive.pareto`), or each island's, under ``islands``; any other archive
reports none and gets no table.
"""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from qdevolve.textsafe import terminal_safe_line

__all__ = ["front_table", "front_tables", "MAX_ROWS"]

MAX_ROWS = 30


def _num(v: Any) -> str:
    return "-" if v is None else f"{float(v):.6g}"


def front_tables(stats: dict[str, Any], *, max_rows: int = MAX_ROWS) -> list[Table]:
    """The archive's front table, or one per island (``islands`` over ``pareto``)."""
    one = front_table(stats, max_rows=max_rows)
    if one is not None:
        return [one]
    out = []
    for isl in stats.get("islands") or []:
        t = front_table(isl, max_rows=max_rows, title=f"island {isl.get('island')}: ") if isinstance(isl, dict) else None
        if t is not None:
            out.append(t)
    return out


def front_table(stats: dict[str, Any], *, max_rows: int = MAX_ROWS, title: str = "") -> Table | None:
    """One row per front member (program id, each objective, crowding distance, niche),
    sorted by the first objective, best first; ``None`` when the archive reports no front."""
    front, objectives = stats.get("front"), stats.get("objectives")
    if not isinstance(front, list) or not isinstance(objectives, dict) or not objectives:
        return None
    names = list(objectives)
    first, sign = names[0], (-1.0 if objectives[names[0]] == "max" else 1.0)
    rows = sorted(front, key=lambda r: sign * float((r.get("objectives") or {}).get(first, 0.0)))
    t = Table(title=f"{title}Pareto front ({len(front)} programs, {stats.get('order', 'nsga2')} order)",
              title_justify="left")
    t.add_column("program", no_wrap=True)
    for n in names:
        t.add_column(terminal_safe_line(f"{n} ({objectives[n]})"), justify="right")
    t.add_column("crowding", justify="right")
    t.add_column("niche")
    for r in rows[:max_rows]:
        vals = r.get("objectives") or {}
        crowd = r.get("crowding")
        t.add_row(Text(terminal_safe_line(str(r.get("program_id", ""))[:12])), *(_num(vals.get(n)) for n in names),
                  "end" if crowd is None else f"{float(crowd):.3g}", Text(terminal_safe_line(str(r.get("cell")))))
    if len(rows) > max_rows:
        t.caption = f"{len(rows) - max_rows} more: qdevolve archive stats --json"
    return t
