"""Semantic clusterer: the outputs of a program on probe inputs (``semantic``).

Kind ``cluster``. Two programs share a semantic class when they produce the same outputs on
the same probe inputs, whatever their text (``x+x+2``, ``2*x+2`` and ``(x+1)*2`` are one
class). This is the outcome key diversity-rl.md §3 ranks strongest for IPS on programs, and a
strategy key for Rare that is computed from the child itself, admitted to the archive or not.

The outputs come from, in order:

1. ``metadata["outputs"]`` (or ``metadata["probe_outputs"]``): the output record the
   evaluator wrote for the probe inputs, inside the sandbox (the way for Python programs:
   candidate code never runs in the controller);
2. ``probe(code)``: a trusted, pure function given to the constructor (a callable, or a
   ``"module:function"`` path) that computes the outputs of a program written in a DSL the
   controller can interpret without executing it, e.g.
   ``"qdevolve.rl.tasks.expr_dsl:semantic_key"`` for the expression DSL. The code is
   ``metadata["code"]`` when present, else the first fenced block of the completion, else the
   completion. A program the probe rejects (it raises ``ValueError``) gets ``on_error``.

Numbers are compared by value (``6`` equals ``6.0``; floats rounded to ``decimals`` places),
other values by their text (an exception the evaluator recorded as its type name compares
equal to the same type), and the record is hashed. Keys look like ``sem:<16 hex>``. A completion
with neither record gets ``missing`` (default ``"sem:none"``; ``None`` raises).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from qdevolve import registry
from qdevolve.cluster import extract_code, stable_hash, unpack

__all__ = ["SemanticCluster", "canonical", "resolve_probe"]

_FIELDS = ("outputs", "probe_outputs")


def canonical(value: Any, decimals: int | None) -> Any:
    """Outputs with numbers compared by value: ints and floats as rounded floats (``6 == 6.0``)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        if isinstance(value, int) and abs(value) > 2**53:
            return value
        v = float(value)
        return (round(v, decimals) if decimals is not None else v) + 0.0
    if isinstance(value, dict):
        return {str(k): canonical(v, decimals) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical(v, decimals) for v in value]
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return canonical(value.tolist(), decimals)
    return repr(value)


def resolve_probe(probe: str | Callable[[str], Any] | None) -> Callable[[str], Any] | None:
    """A probe callable from a callable or a ``"module:function"`` path."""
    if probe is None or callable(probe):
        return probe
    if not isinstance(probe, str) or ":" not in probe:
        raise ValueError(f"semantic probe must be a callable or 'module:function', got {probe!r}")
    module, _, attr = probe.partition(":")
    try:
        fn = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"semantic probe {probe!r} cannot be imported: {exc}") from exc
    if not callable(fn):
        raise ValueError(f"semantic probe {probe!r} is not callable")
    return fn


@registry.cluster("semantic")
class SemanticCluster:
    """Hash of a program's outputs on probe inputs (module docstring)."""

    def __init__(
        self,
        *,
        probe: str | Callable[[str], Any] | None = None,
        decimals: int | None = 6,
        on_error: str | None = "sem:invalid",
        missing: str | None = "sem:none",
    ) -> None:
        self.probe = resolve_probe(probe)
        self.decimals = decimals
        self.on_error = on_error
        self.missing = missing

    def outputs(self, item: Any) -> Any:
        """The output record of ``item`` (raises ``LookupError`` when there is none)."""
        inp = unpack(item)
        for f in _FIELDS:
            if inp.metadata.get(f) is not None:
                return inp.metadata[f]
        if self.probe is None:
            raise LookupError("no outputs")
        code = inp.metadata.get("code")
        return self.probe(str(code) if code is not None else extract_code(inp.text).strip())

    def __call__(self, item: Any) -> str:
        try:
            out = self.outputs(item)
        except LookupError as exc:
            if self.missing is None:
                raise ValueError(
                    "semantic clusterer: no metadata['outputs'] and no probe; let the evaluator record "
                    "its outputs on probe inputs, or give probe='module:function'"
                ) from exc
            return self.missing
        except ValueError as exc:
            if self.on_error is None:
                raise ValueError(f"semantic clusterer: the probe rejected the program: {exc}") from exc
            return self.on_error
        return "sem:" + stable_hash(canonical(out, self.decimals))
