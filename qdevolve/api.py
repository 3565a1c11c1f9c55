"""The Python API: run an evolution from code, without writing an example directory by hand.

Example::

    import qdevolve

    def evaluate(program_path):
        import importlib.util
        spec = importlib.util.spec_from_file_location("cand", program_path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return {"combined_score": -abs(mod.X - 3.0)}

    result = qdevolve.run_evolution("X = 0.5\\n", evaluate, config={"run": {"iterations": 20}},
                                    db="archives/demo.sqlite")
    print(result.best_score, result.best_code)

``run_evolution`` writes an example directory next to the database (``<db>.example/``:
the seeds, the evaluator, ``config.yaml``), so ``qdevolve resume --db <db>`` and the
lineage commands work on API runs exactly as on CLI runs, then validates, evaluates the
seeds in the sandbox and runs. A plain function as evaluator is shipped into the sandbox by
its source: it must be a module-level ``def`` whose imports are inside its body (it runs in
another process; closures and lambdas are refused with a message saying so).
"""

from __future__ import annotations

import inspect
import textwrap
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from qdevolve.errors import ConfigError, EvaluationSetupError
from qdevolve.languages import LANGUAGES, UnknownLanguage, language_for_path, language_named
from qdevolve.programtree import is_tree, parse_tree
from qdevolve.types import Elite, Program

__all__ = ["run_evolution", "EvolutionResult"]

ProgramSource = str | Path


@dataclass
class EvolutionResult:
    """What :func:`run_evolution` returns.

    Attributes:
        run_id: The run's id in the database.
        db: Path of the lineage database (the checkpoint: ``qdevolve resume --db``).
        best_program: The best program found (a seed when no child beat it).
        best_score: Its score.
        seed_score: The best seed's score.
        archive: The archive's elites at the end (program id, score, features, cell).
        stop_reason: Why the run stopped (``budget``, ``wall time``, a token budget, ...).
        by_status: Evaluations by status (``ok``, ``error``, ``invalid``, ...).
        stats: The archive's statistics (coverage, QD-score, ...) and model usage.
    """

    run_id: str
    db: Path
    best_program: Program | None
    best_score: float | None
    seed_score: float | None
    archive: list[Elite] = field(default_factory=list)
    stop_reason: str = "budget"
    by_status: dict[str, int] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def best_code(self) -> str | None:
        """The best program's source."""
        return None if self.best_program is None else self.best_program.code


def _read_source(value: ProgramSource, what: str) -> tuple[str, str | None, Path | None]:
    """``(code, language or None, path or None)`` of a path or a source string."""
    from qdevolve.evolve.setup import read_program

    if what == "seed program" and isinstance(value, (str, Path)) and "\n" not in str(value) and Path(value).is_dir():
        from qdevolve.evolve.setup.example import read_tree_seed

        code, lang = read_tree_seed(Path(value))  # a program of several files (docs/multi-file.md)
        return code, lang, Path(value)
    if isinstance(value, Path) or (isinstance(value, str) and "\n" not in value and Path(value).suffix
                                   and (Path(value).exists() or Path(value).suffix in _EXTENSIONS)):
        p = Path(value)
        if not p.exists() and not p.is_symlink():
            raise EvaluationSetupError(f"{p}: {what} not found")
        try:
            lang = language_for_path(p).name
        except UnknownLanguage as exc:
            raise EvaluationSetupError(str(exc)) from None
        return read_program(p), lang, p
    if not isinstance(value, str):
        raise ConfigError(f"{what} must be a path or source text, got {type(value).__name__}")
    return value, None, None


_EXTENSIONS = {ext for lang in LANGUAGES.values() for ext in lang.extensions}


def _evaluator_source(evaluator: ProgramSource | Callable[..., Any]) -> str:
    """Evaluator module text from a path, a source string or a plain function."""
    if callable(evaluator):
        fn = evaluator
        name = getattr(fn, "__name__", "")
        if not inspect.isfunction(fn) or name == "<lambda>":
            raise ConfigError("evaluator: pass a module-level function defined with def (its source is "
                              "shipped into the sandbox), a path to evaluator.py or its source text")
        if fn.__code__.co_freevars:
            raise ConfigError(f"evaluator {name}(): it uses variables of an enclosing function "
                              f"({', '.join(fn.__code__.co_freevars)}); it runs in the sandbox by its "
                              "source, so define it at module level with its imports inside its body")
        try:
            src = textwrap.dedent(inspect.getsource(fn))
        except (OSError, TypeError) as exc:
            raise ConfigError(f"evaluator {name}(): its source is not available ({exc}); "
                              "define it in a file, not in an interactive shell") from None
        src = "\n".join(ln for ln in src.splitlines() if not ln.lstrip().startswith("@"))
        tail = "" if name == "evaluate" else f"\n\ndef evaluate(program_path):\n    return {name}(program_path)\n"
        return src.rstrip() + "\n" + tail
    code, _, path = _read_source(evaluator, "evaluator")
    if path is not None and path.suffix != ".py":
        raise EvaluationSetupError(f"{path}: an evaluator is a Python file")
    return code


def _config_text(config: Any) -> str | None:
    from qdevolve.evolve.setup import RunConfig

    if config is None:
        return None
    if isinstance(config, (str, Path)) and not (isinstance(config, str) and "\n" in config):
        from qdevolve.evolve.setup import read_config_yaml

        return yaml.safe_dump(read_config_yaml(config), sort_keys=False)
    if isinstance(config, str):
        return config
    if isinstance(config, RunConfig):
        d = config.to_dict()
        return yaml.safe_dump(_native_sections(d), sort_keys=False)
    if isinstance(config, dict):
        return yaml.safe_dump(config, sort_keys=False)
    raise ConfigError(f"config must be a path, YAML text, a dict or a RunConfig, got {type(config).__name__}")


def _native_sections(d: dict[str, Any]) -> dict[str, Any]:
    """A RunConfig's dict as the sections of a native config.yaml."""
    run_keys = ("iterations", "seed", "workers", "wall_time_s", "max_pending", "children_per_parent",
                "max_duplicate_streak", "name")
    out: dict[str, Any] = {"run": {k: d[k] for k in run_keys if d.get(k) is not None}}
    for key in ("archive", "selection", "mutation", "backend", "sandbox", "limits", "evaluator",
                "inspirations", "prompt", "train", "novelty", "budget"):
        if d.get(key) not in (None, [], {}) or key == "backend" and "backend" in d and d["backend"]:
            out[key] = d[key]
    return out


def _write_example(directory: Path, seeds: list[tuple[str, str]], evaluator: str, config: str | None) -> None:
    directory.mkdir(parents=True, exist_ok=False)
    ext = LANGUAGES[seeds[0][1]].extensions[0]
    if is_tree(seeds[0][0]):  # the only seed (run_evolution checked)
        tree = parse_tree(seeds[0][0])
        for rel, text in tree.files.items():
            (directory / "initial_program" / rel).parent.mkdir(parents=True, exist_ok=True)
            (directory / "initial_program" / rel).write_text(text, encoding="utf-8")
        seeds = []
    for i, (code, _lang) in enumerate(seeds):
        name = "initial_program" + ("" if i == 0 else f"_{i + 1}") + ext
        (directory / name).write_text(code, encoding="utf-8")
    (directory / "evaluator.py").write_text(evaluator, encoding="utf-8")
    if config is not None:
        (directory / "config.yaml").write_text(config, encoding="utf-8")


def run_evolution(initial_program: ProgramSource | Sequence[ProgramSource],
                  evaluator: ProgramSource | Callable[..., Any], *, config: Any = None,
                  db: str | Path | None = None, iterations: int | None = None, seed: int | None = None,
                  workers: int | None = None, sandbox: str | None = None, language: str | None = None,
                  progress: bool = False) -> EvolutionResult:
    """Evolve ``initial_program`` under ``evaluator`` and return the result.

    Args:
        initial_program: A seed program (a path or its source text) or a list of seeds; every
            seed is evaluated and starts the archive. A directory is a program of several
            files (docs/multi-file.md), the run's only seed.
        evaluator: A path to ``evaluator.py``, its source text, or a plain function
            ``evaluate(program_path) -> dict`` (shipped into the sandbox by its source).
        config: A config file path, YAML text, a dict (native or OpenEvolve layout) or a
            :class:`~qdevolve.evolve.setup.config.RunConfig`; ``None`` for the defaults.
        db: The database path (default ``archives/api-<time>.sqlite``); must not exist.
        iterations, seed, workers, sandbox: Override the config's values.
        language: The seeds' language when they are given as text (default: the language of
            a seed given as a path, else ``python``).
        progress: Show the progress bar.

    Raises:
        QdevolveError: bad input (one line, nothing created), or a failing seed.
    """
    from qdevolve.db import LineageStore
    from qdevolve.evolve.core import Evolution
    from qdevolve.evolve.setup import check_start, load_example

    items = list(initial_program) if isinstance(initial_program, (list, tuple)) else [initial_program]
    if not items:
        raise ConfigError("initial_program: give at least one seed program")
    read = [_read_source(v, "seed program") for v in items]
    langs = {lang for _, lang, _ in read if lang is not None}
    if language is not None:
        try:
            langs.add(language_named(language).name)
        except UnknownLanguage as exc:
            raise ConfigError(f"language: {exc}") from None
    if len(langs) > 1:
        raise ConfigError(f"initial_program: the seeds mix languages ({', '.join(sorted(langs))}); "
                          "a run evolves programs of one language")
    lang = next(iter(langs), "python")
    seeds = [(code, lang) for code, _, _ in read]
    if len(seeds) > 1 and any(is_tree(code) for code, _ in seeds):
        raise ConfigError("initial_program: a program directory (several files) is the only seed of its run")
    evaluator_text = _evaluator_source(evaluator)
    config_text = _config_text(config)
    db_path = Path(db) if db is not None else Path("archives") / f"api-{time.strftime('%Y%m%d-%H%M%S')}.sqlite"
    if db_path.exists():
        raise ConfigError(f"{db_path}: already exists; pass a new db path (or resume it with "
                          f"'qdevolve resume --db {db_path}')")
    directory = db_path.with_name(db_path.name + ".example")
    if directory.exists():
        raise ConfigError(f"{directory}: already exists; remove it or pass another db path")
    db_path.parent.mkdir(parents=True, exist_ok=True)
    _write_example(directory, seeds, evaluator_text, config_text)
    store = None
    try:
        example = load_example(directory)
        overrides: dict[str, Any] = {"iterations": iterations, "seed": seed, "workers": workers}
        if sandbox is not None:
            overrides["sandbox"] = {"type": sandbox}
        cfg = example.config.with_overrides(**overrides)
        if cfg.name is None:
            cfg = cfg.with_overrides(name=db_path.stem)
        from qdevolve.evolve.setup import Trust

        check_start(example, cfg, db_path, trust=Trust(everything=True))  # the caller's own config
        store = LineageStore(db_path, create=True)
        evo = Evolution.start(example, cfg, store, progress=progress)  # a TrainingListener from cfg.train
    except BaseException:
        if store is not None:
            store.close()
        _remove_if_empty(db_path, directory)
        raise
    try:
        summary = evo.run()
        best = store.get_program(summary.best_program_id) if summary.best_program_id else None
        return EvolutionResult(run_id=summary.run_id, db=db_path, best_program=best,
                               best_score=summary.best_score, seed_score=summary.seed_score,
                               archive=list(evo.archive.elites()), stop_reason=summary.stop_reason,
                               by_status=dict(summary.by_status), stats=dict(summary.stats))
    finally:
        evo.close()
        store.close()


def _remove_if_empty(db_path: Path, directory: Path) -> None:
    """Remove what a failed start created: the database when it holds no run, and the example."""
    import shutil

    from qdevolve.db import sqlite_run_count

    empty = True
    if db_path.exists():
        empty = not sqlite_run_count(db_path)  # unreadable (None) or no run (0)
        if empty:
            for suffix in ("", "-wal", "-shm"):
                Path(str(db_path) + suffix).unlink(missing_ok=True)
    if empty:
        shutil.rmtree(directory, ignore_errors=True)
