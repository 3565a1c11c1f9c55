"""Built-in behaviour descriptors (features) for archives.

An archive reads each configured feature dimension from the evaluator's
``EvalResult.features`` first; only when the evaluator does not report a dimension is
a built-in computed from the program's code:

* ``code_length``: number of characters of the program's code.
* ``ast_complexity``: number of nodes of the program's abstract syntax tree (a size
  measure that ignores comments and formatting; 0 for code that does not parse).
* ``diversity``: mean token-bigram Jaccard distance between the program and a fixed
  reference set (the first ``reference_size`` programs the archive admitted), in [0, 1].
  OpenEvolve uses a cheap code distance against a cached reference set for the same
  purpose; ours is our own Jaccard formulation and is deterministic.
* ``score``: the program's score (allowed as a dimension, as in OpenEvolve).

:class:`FeatureExtractor` holds the only state (the diversity reference set), which is
rebuilt exactly by replaying the same programs in the same order.
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections.abc import Sequence

from qdevolve.errors import ConfigError
from qdevolve.types import EvalResult, Program

__all__ = ["BUILTIN_FEATURES", "FeatureExtractor", "code_length", "ast_complexity", "token_shingles", "jaccard_distance"]

BUILTIN_FEATURES: tuple[str, ...] = ("code_length", "ast_complexity", "diversity", "score")
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z_0-9]*|\d+(?:\.\d*)?|[^\sA-Za-z_0-9]")


def code_length(code: str) -> float:
    """Number of characters of ``code``."""
    return float(len(code))


def ast_complexity(code: str) -> float:
    """Number of AST nodes of ``code`` (0.0 when it does not parse)."""
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
        self._reference: list[tuple[str, frozenset[int]]] = []

    @property
    def needs_reference(self) -> bool:
        return "diversity" in self.dimensions

    def __call__(self, program: Program, result: EvalResult) -> dict[str, float]:
        """The feature dict of ``program`` (one float per dimension).

        Raises:
            ConfigError: a non-built-in dimension is missing from ``result.features``.
        """
        out: dict[str, float] = {}
        shingles: frozenset[int] | None = None
        for name in self.dimensions:
            if name in result.features and result.features[name] is not None:
                out[name] = float(result.features[name])
            elif name == "score":
                out[name] = float(result.score) if result.score is not None else 0.0
            elif name == "code_length":
                out[name] = code_length(program.code)
            elif name == "ast_complexity":
                out[name] = ast_complexity(program.code)
            elif name == "diversity":
                shingles = token_shingles(program.code)
                out[name] = self._diversity(program.id, shingles)
            else:
                raise ConfigError(
                    f"program {program.id}: the evaluator reported no feature '{name}' and it is "
                    f"not a built-in ({', '.join(BUILTIN_FEATURES)}); return it in the evaluator's "
                    "'features' or change the archive's feature_dimensions"
                )
        return out

    def observe(self, program: Program) -> None:
        """Record an admitted program in the diversity reference set (until it is full)."""
        if self.needs_reference and len(self._reference) < self.reference_size:
            if all(pid != program.id for pid, _ in self._reference):
                self._reference.append((program.id, token_shingles(program.code)))

    def _diversity(self, program_id: str, shingles: frozenset[int]) -> float:
        refs = [s for pid, s in self._reference if pid != program_id]
        if not refs:
            return 0.0
        return sum(jaccard_distance(shingles, r) for r in refs) / len(refs)
