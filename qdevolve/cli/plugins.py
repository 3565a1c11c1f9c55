"""``qdevolve plugins list``, and the one ``--plugin FILE`` option of every command that resolves plugins.

:func:`plugin_option` adds ``--plugin FILE`` (repeatable) to a command and
:func:`load_plugins` imports the files it names: each is first imported once in a child
process bounded in time (:func:`~qdevolve.evolve.setup.check_plugin_file`, so a file that
hangs or exits becomes one line), then into this process, where its decorators register its
plugins. ``run``, ``resume``, ``train``, ``eval-policy``, ``sandbox exec|check``,
``archive stats|plot`` and ``plugins list`` take it; ``lineage``, ``runs`` and ``serve``
resolve no plugin (they read stored rows).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import click

from qdevolve import registry

__all__ = ["plugins", "plugin_option", "load_plugins"]

PLUGIN_HELP = "Load plugins from a local .py file (repeatable), e.g. an objective for --objective NAME."


def plugin_option(help: str = PLUGIN_HELP) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--plugin FILE`` (repeatable); the paths arrive as ``plugins: tuple[Path, ...]``."""
    return click.option("--plugin", "plugins", type=click.Path(dir_okay=False, path_type=Path), multiple=True,
                        metavar="FILE", help=help)


def load_plugins(files: Iterable[str | Path]) -> list[registry.PluginFile]:
    """Import each ``--plugin`` file (checked in a child process first); the files' records."""
    from qdevolve.evolve.setup import check_plugin_file  # imported with a time bound

    return [registry.load_plugin_file(check_plugin_file(p)) for p in files]


@click.group()
def plugins() -> None:
    """List registered plugins."""


@plugins.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of {kind, name, source}.")
@click.option("--kind", type=click.Choice(registry.KINDS), default=None, help="Only this kind.")
@plugin_option("Also load a local plugin file (repeatable).")
def list_plugins(as_json: bool, kind: str | None, plugins: tuple[Path, ...]) -> None:
    """Decorated, entry-point and --plugin plugins; broken ones are listed with their error."""
    load_plugins(plugins)
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
