"""An example directory, validated before any evaluation is spent.

Two layouts are recognised:

* OpenEvolve's: ``initial_program.<ext>`` (the seed, with optional EVOLVE-BLOCK markers),
  ``evaluator.py`` (``evaluate(program_path)``, optionally ``evaluate_stage1/2/3``),
  optional ``config.yaml`` and ``prompts/`` overrides. More seeds may sit beside the first
  as ``initial_program_<name>.<ext>``; every seed is evaluated and starts the archive.
* A program tree: a directory ``initial_program/`` holding several files (a top-level
  ``main.<ext>`` is the one the evaluator is handed; see :mod:`qdevolve.programtree`).
* ShinkaEvolve's: ``initial.<ext>`` + ``evaluate.py`` with ``main(program_path,
  results_dir)`` (see :mod:`qdevolve.evolve.compat.shinka_compat`), optional ``shinka.yaml``.

The seed's extension picks the program language (:mod:`qdevolve.languages`). An evaluator
that defines ``evaluate_stage1`` gets cascade evaluation by default (OpenEvolve's default
thresholds ``[0.5, 0.75, 0.9]``) unless the config sets ``evaluator.cascade_evaluation:
false`` or its own ``cascade_thresholds``.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, replace
from pathlib import Path

from qdevolve.errors import EvaluationSetupError
from qdevolve.evolve.setup.config import RunConfig, load_config
from qdevolve.evolve.setup.trust import Trust, is_inside
from qdevolve.evolve.setup.validate import MAX_PROGRAM_BYTES, describe_path, require_file
from qdevolve.languages import UnknownLanguage, language_for_path
from qdevolve.mutation.blocks import START, find_blocks
from qdevolve.programtree import TreeError, dump_tree, read_tree_dir

__all__ = ["Example", "load_example", "check_program_source", "DEFAULT_CASCADE", "read_program", "check_inside",
           "read_tree_seed"]

SEED_STEMS = ("initial_program", "initial")
EVALUATOR_NAMES = ("evaluator.py", "evaluate.py")
CONFIG_NAMES = ("config.yaml", "config.yml", "shinka.yaml")
DEFAULT_CASCADE = (0.5, 0.75, 0.9)
_EXTRA_SEED = re.compile(r"^initial_program[_-]?[\w-]+$")


@dataclass(frozen=True)
class Example:
    """A validated example directory.

    Attributes:
        seed_path, seed_code: The first seed (``initial_program.<ext>`` / ``initial.<ext>``).
        evaluator_path: The evaluator the sandbox runs (for ShinkaEvolve's layout: the
            generated adapter around ``evaluate.py``).
        language: The seed's language (``programs.language`` of every program of the run).
        extra_seeds: Further seeds ``(path, code)``, evaluated and stored like the first.
        layout: ``"openevolve"``, ``"shinka"`` or ``"api"``.
    """

    directory: Path
    seed_path: Path
    evaluator_path: Path
    config_path: Path | None
    seed_code: str
    config: RunConfig
    language: str = "python"
    extra_seeds: tuple[tuple[Path, str], ...] = ()
    layout: str = "openevolve"

    @property
    def seeds(self) -> list[tuple[Path, str]]:
        """Every seed, the first one first."""
        return [(self.seed_path, self.seed_code), *self.extra_seeds]


def check_program_source(path: Path, code: str, language: str = "python") -> None:
    """Raise :class:`EvaluationSetupError` naming ``path`` (and the line of a Python syntax error)."""
    if language == "python":
        try:
            ast.parse(code, filename=str(path))
        except SyntaxError as exc:
            raise EvaluationSetupError(
                f"{path}:{exc.lineno}: syntax error in the seed program: {exc.msg}; fix it before evolving"
            ) from None
        except ValueError as exc:  # NUL bytes
            raise EvaluationSetupError(f"{path}: the seed program cannot be parsed: {exc}") from None
    try:
        find_blocks(code)
    except ValueError as exc:
        raise EvaluationSetupError(f"{path}: {exc}") from None


def read_tree_seed(directory: Path) -> tuple[str, str]:
    """A seed directory's serialised tree (:mod:`qdevolve.programtree`) and its main file's
    language; each file is checked like a one-file seed, and at least one has EVOLVE-BLOCKs
    (in a tree only the files with markers evolve)."""
    try:
        tree = read_tree_dir(directory, max_file_bytes=MAX_PROGRAM_BYTES)
        language = language_for_path(tree.main).name
    except (TreeError, UnknownLanguage) as exc:
        raise EvaluationSetupError(str(exc)) from None
    marked = []
    for rel, text in tree.files.items():
        try:
            lang = language_for_path(rel).name
        except UnknownLanguage:
            lang = ""
        check_program_source(directory / rel, text, lang)
        if START in text:
            marked.append(rel)
    if not marked:
        raise EvaluationSetupError(f"{directory}: no file of the program tree has EVOLVE-BLOCK markers; mark "
                                   "the regions that may evolve (# EVOLVE-BLOCK-START ... # EVOLVE-BLOCK-END)")
    return dump_tree(tree), language


def read_program(path: Path) -> str:
    """A seed program's text (a bounded, UTF-8, regular file)."""
    require_file(path, "seed program", max_bytes=MAX_PROGRAM_BYTES)
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise EvaluationSetupError(f"{path}: the seed program is not UTF-8 text") from None


def _find_seed(d: Path) -> tuple[Path | None, str | None]:
    """The seed of ``d`` and its layout stem; a candidate with an unknown extension is refused."""
    for stem in SEED_STEMS:
        found = sorted(p for p in d.glob(f"{stem}.*") if not p.name.endswith((".pyc", "~", ".swp")))
        if not found:
            continue
        known = [p for p in found if _language_or_none(p) is not None]
        if not known:
            raise EvaluationSetupError(f"{found[0]}: {_unknown_language(found[0])}")
        python = [p for p in known if p.suffix == ".py"]
        return (python or known)[0], stem
    return None, None


def _language_or_none(path: Path) -> str | None:
    try:
        return language_for_path(path).name
    except UnknownLanguage:
        return None


def _unknown_language(path: Path) -> str:
    try:
        language_for_path(path)
    except UnknownLanguage as exc:
        return str(exc).split(": ", 1)[1]
    return ""


def _extra_seeds(d: Path, first: Path, trust: Trust | None = None) -> tuple[tuple[Path, str], ...]:
    out = []
    for p in sorted(d.glob(f"initial_program*{first.suffix}")):
        if p != first and _EXTRA_SEED.match(p.stem):
            check_inside(p, d, trust)
            code = read_program(p)
            check_program_source(p, code, language_for_path(p).name)
            out.append((p.resolve(), code))
    return tuple(out)


def check_inside(path: Path, directory: Path, trust: Trust | None) -> None:
    """Refuse a file of the example that resolves outside it (a symlink leaving the directory)."""
    if is_inside(path, directory) or (trust is not None and trust.allows("symlinks")):
        return
    import os

    raise EvaluationSetupError(
        f"{path}: is a symbolic link to {os.path.realpath(path)}, outside the example directory; the "
        "controller reads only files inside it: pass --trust symlinks (or --trust-config) if you trust "
        "this directory")


def _prompt_links(d: Path, config: RunConfig, trust: Trust | None) -> RunConfig:
    """Check ``prompts/`` (the directory and each ``*.txt``); with ``symlinks`` trusted, the
    texts reached through links out are read now and kept inline (the prompt builder itself
    reads only files inside the example)."""
    prompts = d / "prompts"
    if not (prompts.exists() or prompts.is_symlink()):
        return config
    check_inside(prompts, d, trust)
    inline = dict(config.prompt.get("templates") or {})
    for f in sorted(prompts.glob("*.txt")):
        check_inside(f, d, trust)
        if not is_inside(f, d) and f.stem not in inline:
            require_file(f, "prompt template", max_bytes=MAX_PROGRAM_BYTES)
            inline[f.stem] = f.read_text(encoding="utf-8", errors="replace")
    if inline == dict(config.prompt.get("templates") or {}):
        return config
    return replace(config, prompt={**config.prompt, "templates": inline})


def _defines(path: Path, name: str) -> bool:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return False
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name for n in tree.body)


def with_default_cascade(config: RunConfig, evaluator: Path) -> RunConfig:
    """Turn cascade evaluation on when the evaluator defines ``evaluate_stage1`` (OpenEvolve's default)."""
    ev = dict(config.evaluator)
    if ev.get("cascade_thresholds") or ev.get("cascade_evaluation") is False:
        return config
    if not _defines(evaluator, "evaluate_stage1"):
        return config
    ev["cascade_thresholds"] = list(DEFAULT_CASCADE)
    return replace(config, evaluator=ev)


def load_example(directory: str | Path, *, config_path: str | Path | None = None,
                 trust: Trust | None = None) -> Example:
    """Validate an example directory (seed, evaluator protocol, config keys).

    Every file the controller reads from the directory (seeds, evaluator, its own config,
    ``prompts/``) must lie inside it, symlinks followed, unless ``trust`` allows
    ``symlinks`` (:mod:`qdevolve.evolve.setup.trust`); prompt files reached through such a link
    are then read once here and kept as inline templates.

    Raises:
        EvaluationSetupError / ConfigError: one line naming the file (and key).
    """
    from qdevolve.evolve.compat import shinka_compat
    from qdevolve.sandbox import check_evaluator

    d = Path(directory)
    why = describe_path(d)
    if why == "does not exist":
        raise EvaluationSetupError(f"{d}: example directory not found; pass a directory holding "
                                   f"initial_program.py and evaluator.py")
    if why is not None and why != "is a directory, not a file":
        raise EvaluationSetupError(f"{d}: the example directory {why}")
    if not d.is_dir():
        raise EvaluationSetupError(f"{d}: is not a directory; pass an example directory")
    tree_dir = d / "initial_program"
    if tree_dir.is_dir():
        check_inside(tree_dir, d, trust)
        files = sorted(p.name for p in d.glob("initial_program.*")) + sorted(p.name for p in d.glob("initial.*"))
        if files:
            raise EvaluationSetupError(f"{tree_dir}: a seed directory and a seed file ({files[0]}) side by side; "
                                       "keep one of them")
        seed_path, stem = tree_dir, "tree"
    else:
        seed_path, stem = _find_seed(d)
    if seed_path is None:
        raise EvaluationSetupError(f"{d / 'initial_program.py'}: seed program not found (looked for "
                                   f"initial_program.<ext> and ShinkaEvolve's initial.<ext>)")
    if stem == "tree":
        seed_code, language = read_tree_seed(seed_path)
    else:
        language = language_for_path(seed_path).name
        check_inside(seed_path, d, trust)
        seed_code = read_program(seed_path)
        check_program_source(seed_path, seed_code, language)
    evaluator_path = next((d / n for n in EVALUATOR_NAMES if (d / n).exists() or (d / n).is_symlink()), None)
    if evaluator_path is None:
        raise EvaluationSetupError(f"{d / 'evaluator.py'}: evaluator not found; an example needs evaluator.py "
                                   "(evaluate(program_path)) or ShinkaEvolve's evaluate.py (main(program_path, "
                                   "results_dir))")
    require_file(evaluator_path, "evaluator", max_bytes=shinka_compat.MAX_EVALUATOR_BYTES)
    check_inside(evaluator_path, d, trust)
    layout = "openevolve"
    if shinka_compat.is_shinka_evaluator(evaluator_path):
        layout = "shinka"
        run_evaluator = shinka_compat.adapter_evaluator(evaluator_path)
    else:
        check_evaluator(evaluator_path)
        run_evaluator = evaluator_path
    cfg_path: Path | None
    if config_path is not None:
        cfg_path = Path(config_path)
    else:
        cfg_path = next((d / n for n in CONFIG_NAMES if (d / n).is_file()), None)
    if cfg_path is not None and config_path is None:
        check_inside(cfg_path, d, trust)  # a --config file is the user's own choice
    config = load_config(cfg_path) if cfg_path else RunConfig()
    config = with_default_cascade(config, evaluator_path)
    config = _prompt_links(d, config, trust)
    extra = _extra_seeds(d, seed_path, trust) if stem == "initial_program" else ()
    return Example(d.resolve(), seed_path.resolve(), run_evaluator.resolve(),
                   cfg_path.resolve() if cfg_path else None, seed_code, config,
                   language=language, extra_seeds=extra, layout=layout)
