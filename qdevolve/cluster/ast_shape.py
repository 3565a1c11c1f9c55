"""AST-shape clusterer: a hash of the code's normalised syntax tree (``ast_shape``).

Kind ``cluster``. Two programs get the same key when their Python ASTs are equal after

* every identifier is abstracted: variable, argument, function and class names become ``_``
  (import aliases too); attribute names (``math.sqrt``) and imported module names are kept
  unless ``keep_attributes=False``, since they name the API a strategy uses;
* every constant is abstracted to its type (``3`` and ``7`` are both ``int``);
* docstrings and ``pass`` statements are dropped, and source positions are ignored.

``mode="shape"`` (default) hashes the whole abstracted tree; ``mode="node_types"`` hashes
only the multiset of node types, a coarser "which constructs are used" key. This is the
deterministic replacement for Rewarding-the-Rare's LLM judge suggested in diversity-rl.md
§4. The code is ``metadata["code"]`` when present (the program a diff produced), else the
first fenced code block of the completion, else the completion. Code that does not parse
gets ``on_error`` (default ``"ast:invalid"``; ``None`` raises). Keys look like ``ast:<hex>``.
``parse_strings=True`` abstracts a string constant that parses as an expression as that
expression's tree, so programs that hold their strategy in a string (``EXPR = "3*x+1"``) get
one key per expression shape instead of one key for all.
"""

from __future__ import annotations

import ast
from collections import Counter
from typing import Any

from qdevolve import registry
from qdevolve.cluster import extract_code, stable_hash, unpack

__all__ = ["ASTShapeCluster", "normalized_ast"]

_MODES = ("shape", "node_types")


_MAX_PARSED_STRING = 10_000


class _Abstract(ast.NodeTransformer):
    def __init__(self, keep_attributes: bool, parse_strings: bool = False) -> None:
        self.keep_attributes = keep_attributes
        self.parse_strings = parse_strings

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.Name(id="_", ctx=node.ctx)

    def visit_arg(self, node: ast.arg) -> ast.AST:
        self.generic_visit(node)
        node.arg = "_"
        node.type_comment = None
        return node

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if self.parse_strings and isinstance(node.value, str) and 0 < len(node.value) <= _MAX_PARSED_STRING:
            try:
                inner = ast.parse(node.value.strip(), mode="eval").body
            except (SyntaxError, ValueError, RecursionError):
                pass
            else:  # a program held in a string (EXPR = "3*x+1"): its shape, one level deep
                return _Abstract(self.keep_attributes).visit(inner)
        return ast.Constant(value=type(node.value).__name__)

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        if not self.keep_attributes:
            node.attr = "_"
        return node

    def visit_alias(self, node: ast.alias) -> ast.AST:
        if node.asname is not None:
            node.asname = "_"
        if not self.keep_attributes:
            node.name = "_"
        return node

    def _strip_body(self, body: list[ast.stmt]) -> list[ast.stmt]:
        out = []
        for i, stmt in enumerate(body):
            if isinstance(stmt, ast.Pass):
                continue
            if (
                i == 0
                and isinstance(stmt, ast.Expr)
                and isinstance(stmt.value, ast.Constant)
                and isinstance(stmt.value.value, str)
            ):
                continue  # docstring
            out.append(stmt)
        return out

    def generic_visit(self, node: ast.AST) -> ast.AST:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            node.name = "_"
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            node.names = ["_" for _ in node.names]
        body = getattr(node, "body", None)
        if isinstance(body, list):
            node.body = self._strip_body(body)  # type: ignore[attr-defined]
        return super().generic_visit(node)


def normalized_ast(code: str, *, keep_attributes: bool = True, parse_strings: bool = False) -> ast.AST:
    """The abstracted AST of ``code`` (raises ``SyntaxError`` when it does not parse).

    With ``parse_strings`` a string constant that parses as a Python expression is replaced
    by that expression's abstracted tree (strings inside it stay abstract)."""
    tree = ast.parse(code)
    return _Abstract(keep_attributes, parse_strings).visit(tree)


@registry.cluster("ast_shape")
class ASTShapeCluster:
    """Hash of the identifier- and constant-abstracted AST (see module docstring)."""

    def __init__(
        self,
        *,
        mode: str = "shape",
        keep_attributes: bool = True,
        on_error: str | None = "ast:invalid",
        parse_strings: bool = False,
    ) -> None:
        if mode not in _MODES:
            raise ValueError(f"mode must be one of {', '.join(_MODES)}, got {mode!r}")
        self.mode = mode
        self.keep_attributes = bool(keep_attributes)
        self.on_error = on_error
        self.parse_strings = bool(parse_strings)

    def code_of(self, item: Any) -> str:
        """The code the key is computed from."""
        inp = unpack(item)
        code = inp.metadata.get("code")
        return str(code) if code is not None else extract_code(inp.text)

    def __call__(self, item: Any) -> str:
        code = self.code_of(item)
        try:
            tree = normalized_ast(code.strip(), keep_attributes=self.keep_attributes,
                                  parse_strings=self.parse_strings)
        except (SyntaxError, ValueError) as exc:
            if self.on_error is None:
                raise ValueError(f"ast_shape clusterer: code does not parse: {exc}") from exc
            return self.on_error
        if self.mode == "node_types":
            counts = Counter(
                type(n).__name__
                for n in ast.walk(tree)
                if not isinstance(n, (ast.Load, ast.Store, ast.Del))
            )
            return "ast:" + stable_hash(sorted(counts.items()))
        return "ast:" + stable_hash(ast.dump(tree, annotate_fields=False, include_attributes=False))
