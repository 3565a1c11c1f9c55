"""``qdevolve trust DIR``: vouch for an example directory's own config, as ``direnv allow`` does.

``qdevolve trust DIR`` shows the settings of DIR's config that act on this machine (servers,
secret variables, sandbox options, paths out; :mod:`qdevolve.evolve.setup.host_walk`) and
records DIR's config and prompt files by SHA-256 in the trust store
(:mod:`qdevolve.evolve.setup.trust_store`). ``qdevolve run DIR`` then honours them until one
of the files changes. ``--list`` shows the trusted directories and whether each is still
unchanged; ``--revoke DIR`` forgets one.
"""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from qdevolve.errors import ConfigError
from qdevolve.evolve.setup.trust_store import TrustStore
from qdevolve.textsafe import terminal_safe_line

__all__ = ["trust"]


@click.command("trust")
@click.argument("directory", required=False, type=click.Path(path_type=Path))
@click.option("--list", "list_", is_flag=True, help="List the trusted directories and whether they changed.")
@click.option("--revoke", "revoke", is_flag=True, help="Forget DIRECTORY: its config is no longer trusted.")
def trust(directory: Path | None, list_: bool, revoke: bool) -> None:
    """Trust DIRECTORY's own config (its servers, secrets, sandbox options) until its files change.

    The directory's config and prompt files are recorded by hash in the trust store
    ($QDEVOLVE_TRUST_FILE, else $XDG_CONFIG_HOME/qdevolve/trust.json, else
    ~/.config/qdevolve/trust.json)."""
    store = TrustStore()
    console = Console()
    if list_:
        if directory is not None or revoke:
            raise ConfigError("qdevolve trust --list takes no directory and no --revoke")
        _list(store, console)
        return
    if directory is None:
        raise ConfigError("qdevolve trust: name the example directory (or pass --list)")
    if revoke:
        if store.revoke(directory):
            console.print(f"revoked: {terminal_safe_line(directory.resolve())} is no longer trusted")
        else:
            raise ConfigError(f"{directory}: is not in the trust store {store.path} (see qdevolve trust --list)")
        return
    if not directory.is_dir():
        raise ConfigError(f"{directory}: not a directory; pass an example directory")
    found = _host_keys(directory)
    files = store.grant(directory)
    console.print(f"trusted: {terminal_safe_line(directory.resolve())} ({len(files)} config and prompt "
                  f"file{'s' if len(files) != 1 else ''} recorded in {store.path})")
    for line in found:
        console.print(f"  - {terminal_safe_line(line)}", soft_wrap=True, markup=False)


def _host_keys(directory: Path) -> list[str]:
    """What the directory's config would do on this machine, one line each (none: nothing)."""
    from qdevolve.evolve.setup.consent import directory_host_keys, what_leaves

    config, found = directory_host_keys(directory)
    return what_leaves(found, config) if config is not None else []


def _list(store: TrustStore, console: Console) -> None:
    entries = store.entries()
    if not entries:
        console.print(f"no trusted directories ({store.path})")
        return
    table = Table(title=f"trusted directories ({store.path})")
    for col in ("directory", "granted", "files", "state"):
        table.add_column(col, overflow="fold")
    for d, entry in sorted(entries.items()):
        status = store.status(d)
        state = "unchanged" if status.state == "trusted" else f"revoked: {status.detail}"
        table.add_row(terminal_safe_line(d), str(entry.get("granted_at", "")), str(len(entry.get("files") or {})),
                      terminal_safe_line(state))
    console.print(table)
