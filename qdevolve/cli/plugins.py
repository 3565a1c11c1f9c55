"""``qdevolve plugins list``: every plugin the registry can find, and where it comes from."""

from __future__ import annotations

import json

import click

from qdevolve import registry

__all__ = ["plugins"]


@click.group()
def plugins() -> None:
    """List registered plugins."""


@plugins.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of {kind, name, source}.")
@click.option("--kind", type=click.Choice(registry.KINDS), default=None, help="Only this kind.")
@click.option("--plugin", "plugin_files", multiple=True, type=click.Path(dir_okay=False),
              help="Also load a local plugin file (repeatable).")
def list_plugins(as_json: bool, kind: str | None, plugin_files: tuple[str, ...]) -> None:
    """Decorated, entry-point and --plugin plugins; broken ones are listed with their error."""
    for f in plugin_files:
        registry.load_plugin_file(f)
    regs = [registry.REGISTRIES[kind]] if kind else list(registry.REGISTRIES.values())
    infos = [info for reg in regs for info in reg.infos(load=True)]
    if as_json:
        click.echo(json.dumps([i.to_dict() for i in infos], indent=2))
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title="qdevolve plugins", title_justify="left")
    table.add_column("kind")
    table.add_column("name")
    table.add_column("source", overflow="fold")
    for i in infos:
        source = Text(i.source) if not i.error else Text.assemble(("BROKEN ", "red"), i.error)
        table.add_row(Text(i.kind), Text(i.name), source)
    Console().print(table)
    broken = sum(1 for i in infos if i.error)
    if broken:
        click.echo(f"{broken} plugin(s) failed to load; see the BROKEN rows", err=True)
