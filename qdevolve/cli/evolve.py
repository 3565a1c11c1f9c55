"""``qdevolve run`` and ``qdevolve resume``: the main job.

The options that set :class:`~qdevolve.evolve.setup.config.RunConfig` fields are generated from
the fields' metadata (:func:`~qdevolve.evolve.setup.config.cli_fields`), so the help text has one
source. A run stopped by :class:`~qdevolve.errors.RunAborted` exits 1 with its one-line
message (resumable); a second writer of the same run exits 2 (:class:`~qdevolve.db.RunLocked`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from qdevolve.cli._db import check_new_run, db_option
from qdevolve.cli.plugins import load_plugins, plugin_option
from qdevolve.db._open import is_url
from qdevolve.errors import ConfigError
from qdevolve.evolve.setup import cli_fields
from qdevolve.textsafe import terminal_safe_line

__all__ = ["run", "resume"]


def _apply_overrides(config: Any, values: dict[str, Any], *, model: str | None, api_base: str | None) -> Any:
    """Fold the ``RunConfig`` options given on the command line into the config."""
    def spec(current: dict[str, Any] | None, name_: str) -> dict[str, Any]:
        return dict(current) if current and current.get("type") == name_ else {"type": name_}

    def archive_spec(current: dict[str, Any] | None, name_: str) -> dict[str, Any]:
        """A new archive type keeps the config's options it accepts (grid, ranges, features...)."""
        if not current or current.get("type") == name_:
            return spec(current, name_)
        import inspect

        from qdevolve import registry

        params = inspect.signature(registry.archive.get(name_)).parameters
        takes_all = any(p.kind is p.VAR_KEYWORD for p in params.values())
        kept = {k: v for k, v in current.items() if k != "type" and (takes_all or k in params)}
        return {"type": name_, **kept}

    kw = {name: v for name, v in values.items() if name not in PLUGIN_SLOTS}
    if values.get("sandbox"):
        kw["sandbox"] = spec(config.sandbox, values["sandbox"])
    if values.get("archive"):
        kw["archive"] = archive_spec(config.archive, values["archive"])
    if values.get("selection"):
        kw["selection"] = spec(config.selection, values["selection"])
    backend = values.get("backend")
    if backend or model or api_base:
        b = spec(config.backend, backend or (config.backend or {}).get("type") or "openai")
        if model:
            b.pop("models", None)
            b["model"] = model
        if api_base:
            b["api_base"] = api_base
        kw["backend"] = b
    if values.get("mutation"):
        names = [m.strip() for m in values["mutation"].split(",") if m.strip()]
        existing = {m["type"]: m for m in config.mutation}
        kw["mutation"] = [dict(existing.get(n, {"type": n}), weight=existing.get(n, {}).get("weight", 1.0))
                          for n in names]
    return config.with_overrides(**kw)


PLUGIN_SLOTS = {name for name, _flag, _kind, _help, plugin in cli_fields() if plugin}


def budget_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--max-tokens``, ``--max-cost``, ``--max-wall-time`` (the config's ``budget`` limits);
    values arrive as text in ``budget_flags`` and are checked by
    :func:`~qdevolve.evolve.setup.budget.parse_budget_flag` (one line, exit 2)."""
    from qdevolve.evolve.setup import BUDGET_FLAGS

    for key, flag, help_ in reversed(BUDGET_FLAGS):
        command = click.option(flag, "budget_" + key, default=None, metavar="N", help=help_)(command)
    return command


def _budget_flags(values: dict[str, Any]) -> dict[str, str | None]:
    """Pop the ``budget_*`` options out of ``values``: ``{max_tokens: text or None, ...}``."""
    from qdevolve.evolve.setup import BUDGET_FLAGS

    # only the budget limits: RunConfig has other ``budget_*`` fields (``budget_pool``)
    return {key: values.pop("budget_" + key, None) for key, _flag, _help in BUDGET_FLAGS}


TRUST_HELP = ("Let the example directory's own config (for resume: the config and --plugin files stored "
              "in the database) set KEY, a setting that acts on the host (e.g. sandbox.python, "
              "limits.env_allow, backend.api_base, symlinks, plugins; a prefix such as 'sandbox' covers its "
              "keys); repeatable or comma-separated. See docs/sandbox.md.")


def trust_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--trust KEY`` and ``--trust-config`` (:mod:`qdevolve.evolve.setup.trust`)."""
    command = click.option("--trust-config", "trust_config", is_flag=True,
                           help="Trust every setting of this example directory (or, for resume, of the "
                                "database), as if it were your own config.")(command)
    return click.option("--trust", "trust_keys", multiple=True, metavar="KEY", help=TRUST_HELP)(command)


def _trust(values: dict[str, Any]) -> Any:
    """Pop ``--trust``/``--trust-config`` out of ``values``: a :class:`~qdevolve.evolve.setup.trust.Trust`."""
    from qdevolve.evolve.setup import Trust

    return Trust.of(everything=bool(values.pop("trust_config", False)), keys=values.pop("trust_keys", ()) or ())


def _warn(console: Console, warnings: list[str]) -> None:
    for w in warnings:
        console.print(f"[yellow]warning:[/] {terminal_safe_line(w)}", soft_wrap=True, markup=True)


def _with_user_keys(trust: Any, values: dict[str, Any], *, model: str | None, api_base: str | None) -> Any:
    """The settings the user chose on the command line are the user's, even when the value is
    the one the example's config has (``--sandbox local`` beside ``sandbox: {type: local}``);
    a plugin option names its ``type`` only, never the example's options of that plugin."""
    from dataclasses import replace

    from qdevolve.evolve.setup.host_walk import RUN_FIELDS

    keys = {f"{name}.type" if name in PLUGIN_SLOTS else (f"run.{name}" if name in RUN_FIELDS else name)
            for name in values}
    keys |= {k for k, v in (("backend.model", model), ("backend.api_base", api_base)) if v}
    return replace(trust, keys=trust.keys | frozenset(keys)) if keys else trust


def _note(console: Console, lines: list[str]) -> None:
    """The trust store's line: ``trusted: ...`` (cyan) or ``trust revoked: ...`` (yellow)."""
    for line in lines:
        colour = "cyan" if line.startswith("trusted:") else "yellow"
        head, _, rest = line.partition(": ")
        console.print(f"[{colour}]{head}:[/] {terminal_safe_line(rest)}", soft_wrap=True, markup=True)


def _ask_on_terminal() -> Callable[[str], bool] | None:
    """A yes/no question on the terminal (default no); ``None`` when stdin is not a terminal."""
    import sys

    if not sys.stdin or not sys.stdin.isatty():
        return None

    def ask(text: str) -> bool:
        shown = "\n".join(terminal_safe_line(t) for t in text.splitlines())  # names from the example: made safe
        return click.confirm(shown, default=False, err=True)

    return ask


def config_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """One click option per :class:`RunConfig` field with help text (the field's help is the
    option's help; plugin slots take a plugin name). Values arrive in ``config_values``."""
    for name, flag, kind, help_, _plugin in reversed(cli_fields()):
        command = click.option(flag, name, type=kind, default=None, help=help_)(command)
    return command


@click.command("run")
@click.argument("example_dir", type=click.Path(path_type=Path))
@db_option(required=False, help="Run database: a .sqlite path or a SQLAlchemy URL such as "
           "postgresql+psycopg://USER:PASSWORD@HOST/DB (default: $QDEVOLVE_DB, else "
           "archives/<example>-<time>.sqlite).")
@config_options
@budget_options
@trust_options
@click.option("--ray-address", default=None,
              help="HOST:PORT of a Ray cluster's head (or 'auto', or ray://HOST:10001) for --executor ray.")
@click.option("--model", default=None, help="Model name (for --backend; with --backend transformers: a known model such as smollm2-135m-instruct, or a local HF directory).")
@click.option("--api-base", default=None, help="Base URL of an OpenAI-compatible server.")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=None,
              help="Config file (default: EXAMPLE_DIR/config.yaml).")
@plugin_option("Load plugins from a local .py file (repeatable); its hash is recorded in the run.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option("--policy", default=None, help="Policy to train while evolving: tiny, a known model (qdevolve models), a HF model dir, or vllm:PATH.")
@click.option("--train-objective", default=None, help="Objective that trains the policy (grpo, ips, rare, vpo, ...).")
@click.option("--train-every", type=int, default=None, help="Trainer step every N evaluations.")
@click.option("--objective-arg", "objective_args", multiple=True, help="KEY=VALUE for the objective (repeatable).")
@click.option("--no-train", is_flag=True,
              help="Keep the example's policy operator but never train it (train.enabled: false): a control run.")
@click.option("--base-seed", type=int, default=None,
              help="Seed of the tiny base policy (train.base_seed, default 0), separate from --seed.")
@click.option("--cache-dir", default=None, type=click.Path(file_okay=False),
              help="Where tiny base policies are cached (default: $QDEVOLVE_CACHE_DIR, else ~/.cache/qdevolve/tiny).")
def run(example_dir: Path, db: str | None, ray_address: str | None, model: str | None, api_base: str | None, config_path: Path | None,
        plugins: tuple[Path, ...], no_progress: bool, policy: str | None, train_objective: str | None,
        train_every: int | None, objective_args: tuple[str, ...], no_train: bool, base_seed: int | None,
        cache_dir: str | None, **config_values: Any) -> None:
    """Evolve a program from EXAMPLE_DIR (initial_program.py, evaluator.py, config.yaml)."""
    _register_agents()
    if cache_dir is not None:
        _use_cache_dir(cache_dir)
    from qdevolve.db import LineageStore
    from qdevolve.evolve.core import Evolution, default_db_path
    from qdevolve.evolve.report import print_summary
    from qdevolve.evolve.setup import load_example

    console = Console(stderr=True)
    loaded = load_plugins(plugins)
    trust = _trust(config_values)
    from qdevolve.evolve.setup.consent import settle_trust, trust_from_store

    trust, notes = trust_from_store(example_dir, trust)  # qdevolve trust DIR, unless a file changed
    _note(console, notes)
    example = load_example(example_dir, config_path=config_path, trust=trust)
    for w in example.config.warnings:
        console.print(f"[yellow]warning:[/] {terminal_safe_line(w)}", soft_wrap=True, markup=True)
    from qdevolve.evolve.setup import with_budget_flags

    budget = with_budget_flags(example.config.budget, _budget_flags(config_values))
    values = {k: v for k, v in config_values.items() if v is not None}
    config = _apply_overrides(example.config, values, model=model, api_base=api_base)
    trust = _with_user_keys(trust, values, model=model, api_base=api_base)
    if budget is not config.budget:
        config = config.with_overrides(budget=budget)
    _warn_budget(console, config.budget)
    if ray_address:
        config = _with_ray_address(config, ray_address)
    if policy or train_objective or train_every or objective_args or config.train:
        from qdevolve.evolve.training import apply_policy_options

        config = apply_policy_options(config, policy=policy, objective=train_objective,
                                      every=train_every, objective_args=objective_args)
    if no_train or base_seed is not None:
        if not config.train:
            raise ConfigError(f"{'--no-train' if no_train else '--base-seed'}: {example_dir} trains no policy "
                              "(no train section, no --policy)")
        config = config.with_overrides(train={**config.train, **({"enabled": False} if no_train else {}),
                                              **({"base_seed": base_seed} if base_seed is not None else {})})
    db_target = db or str(default_db_path(example.directory))
    from qdevolve.evolve.setup import check_start

    settled = settle_trust(example, config, trust, ask=_ask_on_terminal())
    config, trust = settled.config, settled.trust
    _warn(console, list(settled.warnings))
    _warn(console, check_start(example, config, None if is_url(db_target) else Path(db_target), trust=trust))
    if config.backend is None and not config.mutation and not config.train:
        console.print("[cyan]no model configured:[/] using the offline 'ast' mutator; select an LLM with "
                      "--backend openai --model NAME \\[--api-base URL]", soft_wrap=True)
    check_new_run(db_target)
    store = LineageStore(db_target, create=True)
    try:
        evo = Evolution.start(example, config, store, progress=not no_progress, console=console,
                              plugin_files=loaded)
        try:
            summary = evo.run()
        finally:
            evo.close()
    except BaseException:
        store.close()
        if store.path is not None and _empty_run_db(store.path):  # a file only: a server keeps its runs
            _remove_db(store.path)
        raise
    print_summary(summary, Console())
    store.close()


def _use_cache_dir(cache_dir: str) -> None:
    """``--cache-dir``: this process (and the workers it starts) cache tiny base policies there."""
    import os

    from qdevolve.rl.tiny import CACHE_ENV

    os.environ[CACHE_ENV] = str(Path(cache_dir).expanduser().resolve())


def _store_limits(store: Any, run_id: str, flags: dict[str, str | None], wall: float | None) -> None:
    """Write resume's new limits into the run's stored config (under the run's lease, so a
    run another process is writing is refused before anything changes)."""
    from qdevolve.evolve.setup import RunConfig, with_budget_flags

    stored = dict(store.get_run(run_id)["config"])
    new = dict(stored, budget=with_budget_flags(stored.get("budget"), flags))
    if wall is not None:
        new["wall_time_s"] = wall
    RunConfig.from_dict(new)  # the stored config still loads
    lease = store.lease(run_id).acquire()
    try:
        store.update_run(run_id, config=new)
    finally:
        lease.release()


def _warn_budget(console: Console, budget: dict[str, Any] | None) -> None:
    from qdevolve.evolve.setup import budget_warnings

    for w in budget_warnings(budget):
        console.print(f"[yellow]warning:[/] {w}", soft_wrap=True, markup=True)


def _with_ray_address(config: Any, address: str) -> Any:
    """``--ray-address`` is ``executor_options.address`` (and implies ``--executor ray``)."""
    if config.executor not in ("local", "ray"):
        raise ConfigError(f"--ray-address: the executor is '{config.executor}', not 'ray'")
    return config.with_overrides(executor="ray", executor_options={**config.executor_options, "address": address})


def _empty_run_db(path: Path) -> bool:
    """True when a database this command created holds no run (setup failed before the seed)."""
    from qdevolve.db import sqlite_run_count

    return sqlite_run_count(path) == 0


def _remove_db(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        p = Path(str(path) + suffix)
        if p.exists():
            p.unlink()


def _unreplaced_plugin_files(rows: list[dict[str, Any]], given: tuple[Path, ...]) -> list[dict[str, Any]]:
    """The recorded plugin files that resume would import from their stored paths: those for
    which the user passed no ``--plugin`` file of the same name or the same bytes."""
    import hashlib

    from qdevolve.evolve.setup import current_plugin_files

    names = {p.name for p in given}
    hashes = {hashlib.sha256(p.read_bytes()).hexdigest() for p in given if p.is_file()}
    return [row for row in current_plugin_files(rows)
            if Path(row["path"]).name not in names and row["sha256"] not in hashes]


def _check_resume_trust(store: Any, rid: str, db: str, trust: Any, *, ray_address: str | None,
                        plugins: tuple[Path, ...] = (), console: Console | None = None,
                        example_dir: str | None = None) -> tuple[list[str], Any]:
    """The stored config and ``--plugin`` files of a run need the same opt-ins as at ``run``:
    a database may come from anyone (:func:`~qdevolve.evolve.setup.trust.check_stored_trust`);
    ``--ray-address`` replaces the stored address, so that one is the user's; the host keys the
    run's example directory sets to the same values are trusted when the directory is in the
    trust store, unchanged (:func:`~qdevolve.evolve.setup.consent.stored_trust_from_store`).

    Returns:
        The warnings to print and the trust to resume with."""
    from qdevolve.cli._db import shown
    from qdevolve.evolve.setup import check_stored_trust

    where = f"{shown(db)}: run {rid[:12]}"
    row = store.get_run(rid)
    config = dict(row["config"])
    from qdevolve.evolve.setup.consent import stored_trust_from_store

    trust, notes = stored_trust_from_store(config, example_dir or row.get("example_dir"), trust)
    if console is not None:
        _note(console, notes)
    if ray_address and isinstance(config.get("executor_options"), dict):
        config["executor_options"] = {k: v for k, v in config["executor_options"].items() if k != "address"}
    warnings = check_stored_trust(config, trust, where=where)
    files = _unreplaced_plugin_files(store.plugin_files(rid), plugins)
    if files and not trust.allows("plugins"):
        raise ConfigError(f"{where}: resuming imports the plugin file {terminal_safe_line(str(files[0]['path']))} "
                          "(recorded by 'qdevolve run --plugin') into this process; a database may come from "
                          "anyone: pass --trust plugins if you trust it, or --plugin FILE for it")
    return warnings, trust


@click.command("resume")
@db_option()
@click.option("--run", "run_id", default=None, help="Run id (default: the latest run).")
@click.option("--iterations", type=int, default=None, help="New total budget of child programs.")
@click.option("--wall-time", "wall_time", default=None, metavar="SECONDS",
              help="Stop this invocation after this many seconds (replaces the stored run.wall_time_s).")
@budget_options
@click.option("--example-dir", default=None, help="Where the example lives now, if it moved.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option("--ray-address", default=None,
              help="The Ray cluster's head when it moved (a run with --executor ray; default: the stored one).")
@plugin_option("A plugin .py file (repeatable): where a recorded plugin file is now, or a new one; "
               "its hash is recorded in the run.")
@trust_options
def resume(db: str, run_id: str | None, iterations: int | None, wall_time: str | None, example_dir: str | None,
           no_progress: bool, ray_address: str | None, plugins: tuple[Path, ...], **budget_values: Any) -> None:
    """Continue a run from its database (after a crash, SIGKILL or to extend the budget).

    ``--iterations``, ``--wall-time`` and the budget options replace the run's stored limits
    (a run stopped by its token, cost or wall-time budget goes on with a larger one); the new
    limits are stored in the run's config. The run's ``--plugin`` files are loaded again
    (a changed file warns; a moved one is named: pass ``--plugin NEW_PATH``)."""
    from qdevolve.db import open_store
    from qdevolve.evolve.core import Evolution
    from qdevolve.evolve.report import print_summary

    _register_agents()
    console = Console(stderr=True)
    if iterations is not None:  # checked before the run is opened: a bad budget costs nothing
        from qdevolve.evolve.setup import check_iterations

        check_iterations(iterations, where="--iterations")
    from qdevolve.evolve.setup import parse_budget_flag

    flags = _budget_flags(budget_values)
    for key, text in flags.items():  # a bad value costs nothing: checked before the database opens
        if text is not None:
            parse_budget_flag(key, text)
    wall = None if wall_time is None else parse_budget_flag("max_wall_time", wall_time, flag="--wall-time")
    trust = _trust(budget_values)
    store = open_store(db)
    rid = store.resolve_run(run_id)
    warnings, trust = _check_resume_trust(store, rid, db, trust, ray_address=ray_address, plugins=plugins,
                                          console=console, example_dir=example_dir)
    _warn(console, warnings)
    if wall is not None or any(v is not None for v in flags.values()):
        _store_limits(store, rid, flags, wall)
        _warn_budget(console, store.get_run(rid)["config"].get("budget"))
    from qdevolve.evolve.setup import reload_plugin_files

    reload_plugin_files(store, rid, plugins,
                        warn=lambda m: console.print(f"[yellow]warning:[/] {terminal_safe_line(m)}",
                                                     soft_wrap=True, markup=True))
    if ray_address and store.get_run(rid)["config"].get("executor") != "ray":
        raise ConfigError(f"--ray-address: run {rid[:12]} does not use the ray executor")
    evo = Evolution.resume(store, rid, iterations=iterations, progress=not no_progress, console=console,
                           example_dir=example_dir, trust=trust,
                           executor_options={"address": ray_address} if ray_address else None)
    try:
        summary = evo.run()
    finally:
        evo.close()
    print_summary(summary, Console())
    store.close()


def _register_agents() -> None:
    """Register the agents plugins (``self``, ``agents``) and the selection rules an agents run
    names (``hgm``, ``greedy``) by importing their packages: they are entry points too, but an
    editable install made before they existed does not list them."""
    import qdevolve.agents  # noqa: F401
    import qdevolve.selection  # noqa: F401
