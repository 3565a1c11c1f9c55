"""``qdevolve runs list``: the runs stored in a lineage database."""

from __future__ import annotations

import json
import time

import click

from qdevolve.cli._db import db_option, shown
from qdevolve.db.store import open_store
from qdevolve.evolve.setup.budget import spender_line
from qdevolve.textsafe import terminal_safe_line as _safe

__all__ = ["runs"]


def _when(ts: float | None) -> str:
    return "" if ts is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


@click.group()
def runs() -> None:
    """List the runs stored in a database."""


@runs.command("list")
@db_option()
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list instead of a table.")
def list_runs(db: str, as_json: bool) -> None:
    """Every run with its program count, evaluations and best score."""
    with open_store(db) as store:
        rows = store.list_runs()
        where = shown(db)
        for r in rows:  # model usage (tokens, cost per model) stored by the budget meter
            r["usage"] = store.get_state(r["id"], "usage") or {}
            r["tokens"], r["cost"] = r["usage"].get("tokens", 0), r["usage"].get("cost", 0.0)
            r["spent_by"] = spender_line(r["usage"])  # engine / agents / judge
    if as_json:
        keys = ("id", "name", "status", "programs", "evaluations", "best_score", "seed",
                "example_dir", "created_at", "updated_at", "tokens", "cost", "usage", "spent_by")
        click.echo(json.dumps([{k: r.get(k) for k in keys} for r in rows], indent=2))
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"runs in {where}", title_justify="left")
    for col, just in (("id", "left"), ("name", "left"), ("status", "left"), ("programs", "right"),
                      ("evaluations", "right"), ("best score", "right"), ("tokens", "right"), ("cost", "right"),
                      ("spent by", "left"), ("created", "left")):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in rows:
        best = "-" if r["best_score"] is None else f"{r['best_score']:.6g}"
        cost = r["cost"] if isinstance(r["cost"], (int, float)) else 0.0
        table.add_row(Text(_safe(r["id"][:12])), Text(_safe(r["name"])), Text(_safe(r["status"])), str(r["programs"]),
                      str(r["evaluations"]), best, Text(_safe(r["tokens"])), f"{cost:.4g}",
                      Text(_safe(r["spent_by"])), _when(r["created_at"]))
    console = Console(width=max(120, Console().width))
    if not rows:
        console.print(Text(f"{where}: no runs yet"))
        return
    console.print(table)
