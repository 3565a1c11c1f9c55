"""Built-in behaviour descriptors (features) for archives.

An archive reads each configured feature dimension from the evaluator's
``EvalResult.features`` first, then from its ``metrics`` (OpenEvolve's convention: a
feature dimension named like a metric the evaluator returns uses that metric's raw value);
only when the evaluator reports neither is a built-in computed from the program's code:

* ``code_length``: number of characters of the program's code.
* ``complexity``: OpenEvolve's built-in of that name, which is also the code length in
  characters (``openevolve/database.py``, ``_calculate_feature_coords``).
* ``ast_complexity``: number of nodes of the program's abstract syntax tree (a size
  measure that ignores comments and formatting; 0 for code that does not parse).
* ``diversity``: mean token-bigram Jaccard distance between the program and a fixed
  reference set (the first ``reference_size`` programs the archive admitted), in [0, 1].
  OpenEvolve uses a cheap code distance against a cached reference set for the same
  purpose; ours is our own Jaccard formulation and is deterministic.
* ``code_diversity``: OpenEvolve's ``diversity`` built-in: the mean, over the reference
  set, of its "fast code diversity" ``0.1 * |len(a) - len(b)| + 10 * |lines(a) - lines(b)|
  + 0.5 * |chars(a) ^ chars(b)|`` (the symmetric difference of the character sets), 0 for
  identical code. OpenEvolve-format configs map their ``diversity`` dimension to it. Our
  reference set is the first ``reference_size`` admitted programs (OpenEvolve uses all
  programs while there are at most 20, then a greedy max-min subset from a random start;
  ours needs no random draw so replay rebuilds it exactly).
* ``score``: the program's score (allowed as a dimension, as in OpenEvolve).

A value that is missing or not finite cannot be placed: :class:`FeatureExtractor` raises
:class:`UnplaceableResult` (a ``ConfigError``), which the engine turns into an ``invalid``
evaluation stored with the reason; the run goes on.

:class:`FeatureExtractor` holds the only state (the diversity reference set), which is
rebuilt exactly by replaying the same programs in the same order.
"""

from __future__ import annotations

import ast
import hashlib
import math
import re
from collections.abc import Sequence

from qdevolve.errors import ConfigError
from qdevolve.programtree import TreeError, is_tree, parse_tree
from qdevolve.types import EvalResult, Program

__all__ = ["BUILTIN_FEATURES", "FeatureExtractor", "UnplaceableResult", "code_length", "ast_complexity",
           "token_shingles", "jaccard_distance", "fast_code_diversity", "code_shape", "shape_distance"]

BUILTIN_FEATURES: tuple[str, ...] = ("code_length", "complexity", "ast_complexity", "diversity",
                                     "code_diversity", "score")
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z_0-9]*|\d+(?:\.\d*)?|[^\sA-Za-z_0-9]")


def code_length(code: str) -> float:
    """Number of characters of ``code``."""
    return float(len(code))


def ast_complexity(code: str) -> float:
    """Number of AST nodes of ``code`` (0.0 when it does not parse); of a program tree
    (:mod:`qdevolve.programtree`), the sum over its Python files."""
    if is_tree(code):
        try:
            files = parse_tree(code).files
        except TreeError:
            return 0.0
        return float(sum(ast_complexity(t) for p, t in files.items() if p.endswith(".py")))
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return 0.0
    return float(sum(1 for _ in ast.walk(tree)))


def token_shingles(code: str) -> frozenset[int]:
    """Hashed token bigrams of ``code`` with comments stripped (a set of 64-bit ints)."""
    lines = [ln.split("#", 1)[0] for ln in code.splitlines()]
    toks = _TOKEN.findall("\n".join(lines))
    grams = zip(toks, toks[1:], strict=False) if len(toks) > 1 else ((t, "") for t in toks)
    return frozenset(
        int.from_bytes(hashlib.blake2b(f"{a}\x00{b}".encode(), digest_size=8).digest(), "little")
        for a, b in grams
    )


def code_shape(code: str) -> tuple[int, int, frozenset[str]]:
    """``(characters, newlines, character set)`` of ``code``: all that the fast distance reads."""
    return len(code), code.count("\n"), frozenset(code)


def shape_distance(a: tuple[int, int, frozenset[str]], b: tuple[int, int, frozenset[str]]) -> float:
    """OpenEvolve's fast code distance between two :func:`code_shape` values."""
    return 0.1 * abs(a[0] - b[0]) + 10.0 * abs(a[1] - b[1]) + 0.5 * len(a[2] ^ b[2])


def fast_code_diversity(a: str, b: str) -> float:
    """OpenEvolve's cheap code distance (see the module docstring); 0.0 when ``a == b``."""
    if a == b:
        return 0.0
    return shape_distance(code_shape(a), code_shape(b))


class UnplaceableResult(ConfigError):
    """An evaluated program's features cannot be computed (a missing or non-finite value)."""


def jaccard_distance(a: frozenset[int], b: frozenset[int]) -> float:
    """``1 - |a ∩ b| / |a ∪ b|`` (0 for two empty sets)."""
    union = len(a | b)
    return 0.0 if union == 0 else 1.0 - len(a & b) / union


class FeatureExtractor:
    """Computes a program's feature vector for the configured dimensions.

    Args:
        dimensions: Feature names, in order. Names outside :data:`BUILTIN_FEATURES` must
            be reported by the evaluator in ``EvalResult.features``.
        reference_size: Size of the diversity reference set.

    Raises:
        ConfigError: ``dimensions`` is empty or has duplicates.
    """

    def __init__(self, dimensions: Sequence[str], *, reference_size: int = 16) -> None:
        dims = list(dimensions)
        if not dims:
            raise ConfigError("archive feature_dimensions must name at least one feature")
        if len(set(dims)) != len(dims):
            raise ConfigError(f"archive feature_dimensions has duplicates: {dims}")
        if reference_size < 1:
            raise ConfigError(f"archive diversity reference_size must be >= 1, got {reference_size}")
        self.dimensions: tuple[str, ...] = tuple(str(d) for d in dims)
        self.reference_size = int(reference_size)
        self._reference: list[tuple[str, frozenset[int]]] = []  # (id, shingles) for `diversity`
        self._reference_code: list[tuple[str, tuple[int, int, frozenset[str]]]] = []  # (code, shape)

    @property
    def needs_reference(self) -> bool:
        return "diversity" in self.dimensions or "code_diversity" in self.dimensions

    def __call__(self, program: Program, result: EvalResult) -> dict[str, float]:
        """The feature dict of ``program`` (one float per dimension).

        Raises:
            ConfigError: a non-built-in dimension is missing from ``result.features``.
        """
        out: dict[str, float] = {}
        for name in self.dimensions:
            if name in result.features and result.features[name] is not None:
                value = result.features[name]
            elif name in result.metrics and result.metrics[name] is not None:
                value = result.metrics[name]
            elif name == "score":
                value = float(result.score) if result.score is not None else 0.0
            elif name in ("code_length", "complexity"):
                value = code_length(program.code)
            elif name == "ast_complexity":
                value = ast_complexity(program.code)
            elif name == "diversity":
                value = self._diversity(program.id, token_shingles(program.code))
            elif name == "code_diversity":
                value = self._code_diversity(program)
            else:
                raise UnplaceableResult(
                    f"program {program.id}: the evaluator reported no feature or metric '{name}' "
                    f"and it is not a built-in ({', '.join(BUILTIN_FEATURES)}); return it in the "
                    "evaluator's result or change the archive's feature_dimensions"
                )
            try:
                out[name] = float(value)
            except (TypeError, ValueError):
                raise UnplaceableResult(f"program {program.id}: feature '{name}' is not a number: "
                                        f"{value!r:.60}") from None
            if not math.isfinite(out[name]):
                raise UnplaceableResult(f"program {program.id}: feature '{name}' is not finite: {out[name]}")
        return out

    def reference_state(self) -> list[list[str]]:
        """The diversity reference set as JSON: ``[program id, code]`` pairs, in order."""
        return [[pid, code] for (pid, _), (code, _) in zip(self._reference, self._reference_code, strict=True)]

    def load_reference_state(self, pairs: list[list[str]]) -> None:
        """Refill the (empty) reference set from :meth:`reference_state` output."""
        for pid, code in pairs:
            self._reference.append((pid, token_shingles(code)))
            self._reference_code.append((code, code_shape(code)))

    def observe(self, program: Program) -> None:
        """Record an admitted program in the diversity reference set (until it is full)."""
        if self.needs_reference and len(self._reference) < self.reference_size:
            if all(pid != program.id for pid, _ in self._reference):
                self._reference.append((program.id, token_shingles(program.code)))
                self._reference_code.append((program.code, code_shape(program.code)))

    def _diversity(self, program_id: str, shingles: frozenset[int]) -> float:
        refs = [s for pid, s in self._reference if pid != program_id]
        if not refs:
            return 0.0
        return sum(jaccard_distance(shingles, r) for r in refs) / len(refs)

    def _code_diversity(self, program: Program) -> float:
        # OpenEvolve skips reference programs with identical code (distance 0 by definition).
        refs = [shape for (pid, _), (code, shape) in zip(self._reference, self._reference_code, strict=True)
                if pid != program.id and code != program.code]
        if not refs:
            return 0.0
        mine = code_shape(program.code)
        return sum(shape_distance(mine, r) for r in refs) / len(refs)
