"""``qdevolve lineage templates``: the prompt-template population of a run and its tree.

Each template shows its parent, origin (``seed``, ``offline``, ``model``), status, children
and fitness (:mod:`qdevolve.prompts.evolution`), as a tree from the seeds; ``--show ID``
prints one template's text and the programs it made. Template text was written by a model:
it is printed through :mod:`qdevolve.textsafe`.
"""

from __future__ import annotations

import json

import click

from qdevolve.cli._db import db_option
from qdevolve.cli._tree_labels import _safe
from qdevolve.textsafe import terminal_safe

__all__ = ["templates"]


@click.command()
@db_option()
@click.option("--run", "run_id", default=None, help="Run id or unique prefix (default: the latest run).")
@click.option("--show", "show_id", default=None, help="Print this template's text and its programs (id or prefix).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON rows (with each template's program ids).")
def templates(db: str, run_id: str | None, show_id: str | None, as_json: bool) -> None:
    """Prompt templates of a run (prompt: {evolve: true}): tree, fitness, programs made."""
    from qdevolve.db.store import open_store
    from qdevolve.evolve.core.prompt_population import replay_population

    with open_store(db) as store:
        rid = store.resolve_run(run_id)
        pop, kids = replay_population(store, rid)
    rows = pop.summary()
    for r in rows:
        r["programs"] = kids.get(r["id"], [])
    if show_id is not None:
        hits = [t for t in pop.templates.values() if t.id.startswith(show_id)]
        if len(hits) != 1:
            raise click.ClickException(f"template {show_id!r}: {'no' if not hits else len(hits)} templates of run "
                                       f"{rid[:12]} match; pass more of the id (see 'qdevolve lineage templates')")
        t = hits[0]
        click.echo(f"template  {_safe(t.id)}   {_safe(t.name)}   origin {_safe(t.origin)}   status "
                   f"{_safe(t.status)}   parent {_safe(t.parent_id or '(seed)')}")
        if t.reason:
            click.echo(f"refused   {_safe(t.reason)}")
        click.echo(f"programs  {', '.join(p[:12] for p in kids.get(t.id, [])) or '(none)'}")
        click.echo("text:")
        click.echo(terminal_safe(t.text.rstrip("\n")))
        return
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo(f"run {_safe(rid)}: no prompt templates (run with prompt: {{evolve: true}} to evolve them)")
        return
    children: dict[str | None, list[dict]] = {}
    ids = {r["id"] for r in rows}
    for r in rows:
        children.setdefault(r["parent_id"] if r["parent_id"] in ids else None, []).append(r)
    click.echo(f"prompt templates of run {_safe(rid[:12])} (fitness = (sum of rewards + 0.5) / (children + 1))")

    def walk(parent: str | None, indent: str) -> None:
        for r in children.get(parent, []):
            click.echo(f"{indent}{_safe(r['id'][:12])}  {_safe(r['name'])}  {_safe(r['origin'])}  {_safe(r['status'])}"
                       f"  children {r['children']}  fitness {r['fitness']:.4f}")
            walk(r["id"], indent + "  ")

    walk(None, "")
