"""``qdevolve sandbox exec|check``: run one program in a sandbox; check a sandbox against attacks."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from qdevolve.cli.plugins import load_plugins, plugin_option
from qdevolve.errors import ConfigError, EvaluationSetupError
from qdevolve.textsafe import terminal_safe, terminal_safe_line

__all__ = ["sandbox"]

_BACKENDS = ("auto", "local", "bwrap", "docker")
_FULL_ARTIFACTS = {"traceback": 65536, "candidate_traceback": 65536}


BACKEND_HELP = "Sandbox backend: auto (bwrap where it works, else local), local, bwrap, docker, or a --plugin sandbox."


def _make(backend: str, warm: bool, image: str | None):
    from qdevolve import registry
    from qdevolve.sandbox import resolve_sandbox

    if backend not in _BACKENDS and backend not in registry.sandbox:
        raise ConfigError(f"--backend {backend!r}: no such sandbox; known: "
                          f"{', '.join(dict.fromkeys([*_BACKENDS, *registry.sandbox.names()]))} "
                          "(a sandbox plugin file: --plugin FILE)")
    name = resolve_sandbox({"type": backend})["type"] if backend in _BACKENDS else backend
    spec: dict = {"type": name}
    if name in ("docker", "local", "bwrap"):
        spec["warm"] = warm
    if name == "docker" and image:
        spec["image"] = image
    return name, registry.sandbox.create(spec)


@click.group("sandbox")
def sandbox() -> None:
    """Run programs in a sandbox; check a sandbox against the attack catalogue."""


@sandbox.command("exec")
@click.argument("program", type=click.Path(path_type=Path))
@click.option("--evaluator", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="evaluator.py defining evaluate(program_path); default: run PROGRAM as __main__, score 1.0 on a clean exit.")
@click.option("--backend", default="auto", show_default=True, help=BACKEND_HELP)
@click.option("--wall-s", type=float, default=None, help="Wall-clock limit in seconds (default 30).")
@click.option("--cpu-s", type=float, default=None, help="CPU-time limit in seconds (default 30).")
@click.option("--memory-mb", type=int, default=None, help="Memory limit in MiB (default 1024).")
@click.option("--cascade", default=None, help="Cascade thresholds, comma-separated (e.g. 0.5,0.8).")
@click.option("--warm/--no-warm", default=False,
              help="docker: reuse a warm container; local, bwrap: fork from a warm template.")
@click.option("--image", default=None, help="docker: image name.")
@click.option("--json", "as_json", is_flag=True, help="Print the EvalResult as JSON.")
@plugin_option()
def exec_(program: Path, evaluator: Path | None, backend: str, wall_s: float | None,
          cpu_s: float | None, memory_mb: int | None, cascade: str | None, warm: bool,
          image: str | None, as_json: bool, plugins: tuple[Path, ...]) -> None:
    """Evaluate PROGRAM (a file, or a directory of several files: docs/multi-file.md) in a sandbox and print the EvalResult."""
    load_plugins(plugins)
    from qdevolve.sandbox import SandboxLimits, check_evaluator

    if not (program.is_file() or program.is_dir()):
        raise EvaluationSetupError(f"program {program} does not exist")
    if evaluator is not None:
        check_evaluator(evaluator)
    changes = {k: v for k, v in (("wall_s", wall_s), ("cpu_s", cpu_s), ("memory_mb", memory_mb)) if v is not None}
    try:
        limits = SandboxLimits(**changes)
        thresholds = None if cascade is None else [float(x) for x in cascade.split(",") if x.strip()]
    except ValueError as exc:
        raise ConfigError(f"sandbox exec: {exc}") from exc
    name, box = _make(backend, warm, image)
    try:
        result = box.evaluate(_read(program), evaluator, limits, cascade_thresholds=thresholds)
    finally:
        box.close()
    if as_json:
        click.echo(json.dumps({"backend": name, **result.to_dict()}, indent=2))
    else:  # everything below may come from the candidate: shown with its controls escaped
        click.echo(f"backend:  {name}")
        click.echo(f"status:   {result.status}")
        click.echo(f"score:    {result.score}")
        if result.error:
            click.echo(f"error:    {terminal_safe_line(result.error)}")
        click.echo(f"runtime:  {result.runtime_s:.3f} s")
        for k, v in sorted(result.metrics.items()):
            click.echo(f"metric    {terminal_safe_line(k)} = {v}")
        for k, v in sorted(result.artifacts.items()):
            keep = _FULL_ARTIFACTS.get(k, 2000)  # tracebacks in full (bounded by the sandbox)
            tail = v if len(v) <= keep else "..." + v[-keep:]
            click.echo(f"--- {terminal_safe_line(k)} ---\n{terminal_safe(tail.rstrip())}")
    sys.exit(0 if result.ok else 1)


def _read(program: Path) -> Any:
    """A file, or a directory as a program tree (its ``main.<ext>`` handed to the evaluator)."""
    from qdevolve.evolve.setup.example import read_tree_seed
    from qdevolve.types import Program

    if program.is_dir():
        code, language = read_tree_seed(program)
        return Program(code=code, language=language)
    return Program(code=program.read_text(encoding="utf-8"), language=_language(program))


def _language(program: Path) -> str:
    """The program's language by its extension (``initial_program.c`` is C), else Python."""
    from qdevolve.languages import UnknownLanguage, language_for_path

    try:
        return language_for_path(program).name
    except UnknownLanguage:
        return "python"


@sandbox.command("check")
@click.option("--backend", default="auto", show_default=True, help=BACKEND_HELP)
@click.option("--warm/--no-warm", default=False,
              help="docker: reuse a warm container; local, bwrap: fork from a warm template.")
@click.option("--image", default=None, help="docker: image name.")
@click.option("--only", default=None, help="Comma-separated attack names (default: all).")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON.")
@plugin_option()
def check(backend: str, warm: bool, image: str | None, only: str | None, as_json: bool,
          plugins: tuple[Path, ...]) -> None:
    """Run the built-in attack catalogue; exit status 1 if any row fails."""
    load_plugins(plugins)
    from qdevolve.sandbox.attacks import ATTACKS, run_catalogue

    attacks = ATTACKS
    if only:
        wanted = {x.strip() for x in only.split(",") if x.strip()}
        unknown = wanted - {a.name for a in ATTACKS}
        if unknown:
            raise ConfigError(f"unknown attack(s) {', '.join(sorted(unknown))}; known: "
                              f"{', '.join(a.name for a in ATTACKS)}")
        attacks = tuple(a for a in ATTACKS if a.name in wanted)
    name, box = _make(backend, warm, image)
    from qdevolve.sandbox._cgroup import backend_memory_enforcement

    memory = backend_memory_enforcement(name)

    def show(row) -> None:
        if not as_json:
            mark = "PASS" if row.passed else "FAIL"
            click.echo(f"{row.attack:<22} {row.expected:<22} {row.got:<8} {row.seconds:6.2f}  {mark}"
                       + ("" if row.passed else "  " + terminal_safe_line("; ".join(row.failures))))

    if not as_json:
        click.echo(f"backend: {name}" + (" (warm)" if getattr(box, "warm", False) else ""))
        click.echo(f"{'attack':<22} {'expected':<22} {'got':<8} {'seconds':>6}")
    try:
        from qdevolve.evolve.compat.shinka_compat import adapter_evaluator

        rows = run_catalogue(box, attacks=attacks, on_row=show, wrappers={"shinka": adapter_evaluator})
    finally:
        box.close()
    failed = [r for r in rows if not r.passed]
    if as_json:
        click.echo(json.dumps({"backend": name, "memory_enforcement": memory, "rows": [
            {"attack": r.attack, "expected": r.expected, "got": r.got, "seconds": round(r.seconds, 3),
             "passed": r.passed, "failures": r.failures} for r in rows]}, indent=2))
    else:
        click.echo(f"{len(rows) - len(failed)}/{len(rows)} passed")
        click.echo(f"memory:  {memory}")
    sys.exit(1 if failed else 0)
