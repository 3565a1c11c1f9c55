"""``qdevolve policy export``: a stored policy version as a plain Hugging Face model directory.

A LoRA run stores each version as an adapter over a named base (a few MB); ``export`` loads
the base it records (checking its content hash), merges the adapter into it and writes model
and tokenizer with ``save_pretrained``, a directory any Hugging Face tool (or ``--model DIR``)
loads without PEFT. A full-weight version is written as it is.
"""

from __future__ import annotations

from pathlib import Path

import click

from qdevolve.cli._db import db_option, shown

__all__ = ["policy"]


@click.group("policy")
def policy() -> None:
    """Stored policy versions: export one as a plain Hugging Face directory."""


@policy.command("export")
@click.argument("run_id")
@click.option("--version", "version", type=int, default=None, help="The policy version (default: the latest).")
@click.option("--out", "out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="New (or empty) directory to write the merged model and tokenizer to.")
@click.option("--base", "base", default=None, type=click.Path(file_okay=False, path_type=Path),
              help="The base model's directory when it moved since training (its content hash is checked).")
@db_option(help="Lineage database holding the run: a .sqlite path or a SQLAlchemy URL (default: $QDEVOLVE_DB).")
def export(run_id: str, version: int | None, out: Path, base: Path | None, db: str) -> None:
    """Write RUN_ID's policy VERSION merged (adapter + base) as a plain Hugging Face directory."""
    from qdevolve.backends.transformers_backend import quiet_transformers
    from qdevolve.db.store import open_store
    from qdevolve.rl.checkpoints import export_version
    from qdevolve.textsafe import terminal_safe_line

    quiet_transformers()
    with open_store(db) as store:
        rid = store.resolve_run(run_id)
        rows = store.policy_versions(rid)
        chosen = version if version is not None else (rows[-1]["version"] if rows else None)
        path = export_version(store, rid, version, out, base=base)
    click.echo(terminal_safe_line(f"run {rid[:12]} policy version {chosen} in {shown(db)}: exported to {path}"))
