"""An example directory in OpenEvolve's layout, validated before any evaluation is spent.

``initial_program.py`` (the seed, with optional EVOLVE-BLOCK markers), ``evaluator.py``
(``evaluate(program_path)``), optional ``config.yaml`` and optional ``prompts/`` overrides.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from qdevolve.errors import EvaluationSetupError
from qdevolve.evolve.config import RunConfig, load_config
from qdevolve.mutation.blocks import find_blocks

__all__ = ["Example", "load_example"]

SEED_NAMES = ("initial_program.py",)
EVALUATOR_NAME = "evaluator.py"
CONFIG_NAMES = ("config.yaml", "config.yml")


@dataclass(frozen=True)
class Example:
    """A validated example directory."""

    directory: Path
    seed_path: Path
    evaluator_path: Path
    config_path: Path | None
    seed_code: str
    config: RunConfig


def check_program_source(path: Path, code: str) -> None:
    """Raise :class:`EvaluationSetupError` naming ``path`` and the line of a syntax error."""
    try:
        ast.parse(code, filename=str(path))
    except SyntaxError as exc:
        raise EvaluationSetupError(
            f"{path}:{exc.lineno}: syntax error in the seed program: {exc.msg}; fix it before evolving"
        ) from None
    try:
        find_blocks(code)
    except ValueError as exc:
        raise EvaluationSetupError(f"{path}: {exc}") from None


def load_example(directory: str | Path, *, config_path: str | Path | None = None) -> Example:
    """Validate an example directory (seed syntax, evaluator protocol, config keys).

    Raises:
        EvaluationSetupError / ConfigError: one line naming the file (and key).
    """
    from qdevolve.sandbox import check_evaluator

    d = Path(directory)
    if not d.exists():
        raise EvaluationSetupError(f"{d}: example directory not found; pass a directory holding "
                                   f"initial_program.py and evaluator.py")
    if not d.is_dir():
        raise EvaluationSetupError(f"{d}: is not a directory; pass an example directory")
    seed_path = next((d / n for n in SEED_NAMES if (d / n).is_file()), None)
    if seed_path is None:
        raise EvaluationSetupError(f"{d / SEED_NAMES[0]}: seed program not found")
    try:
        seed_code = seed_path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise EvaluationSetupError(f"{seed_path}: is not UTF-8 text") from None
    check_program_source(seed_path, seed_code)
    evaluator_path = d / EVALUATOR_NAME
    check_evaluator(evaluator_path)
    cfg_path: Path | None
    if config_path is not None:
        cfg_path = Path(config_path)
    else:
        cfg_path = next((d / n for n in CONFIG_NAMES if (d / n).is_file()), None)
    config = load_config(cfg_path) if cfg_path else RunConfig()
    return Example(d.resolve(), seed_path.resolve(), evaluator_path.resolve(),
                   cfg_path.resolve() if cfg_path else None, seed_code, config)
