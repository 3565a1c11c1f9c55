"""Normalised-AST clusterer: a hash of the program up to names and layout (``ast_hash``).

Kind ``cluster``. Two programs get the same key when their Python syntax trees are equal
after normalisation:

* locally bound names (variables, arguments, functions, classes, import aliases) are
  renamed ``v0, v1, ...`` in order of first appearance (alpha-renaming: consistent, so
  ``a + a`` and ``a + b`` stay different); names never bound in the program (builtins,
  free variables such as the DSL input ``x``) and attribute names are kept;
* docstrings, ``pass`` statements, comments, type comments and source positions are dropped;
* constants are kept (``2*x`` and ``3*x`` differ; that coarser key is ``ast_shape``);
* with ``commutative=True`` the operands of ``+``, ``*``, ``&``, ``|``, ``^``, ``==`` and
  ``!=`` are put in a canonical order (right for numbers, wrong for string or list ``+``, so
  off by default).

It is finer than ``ast_shape`` (which abstracts every constant and name) and coarser than the
text. The code is ``metadata["code"]`` when present, else the first fenced code block, else the
completion. Code that does not parse gets ``on_error`` (default ``"astn:invalid"``; ``None``
raises). Keys look like ``astn:<16 hex>``.
"""

from __future__ import annotations

import ast
from typing import Any

from qdevolve import registry
from qdevolve.cluster import extract_code, stable_hash, unpack

__all__ = ["ASTHashCluster", "normalize_source"]

_COMMUTATIVE_BINOPS = (ast.Add, ast.Mult, ast.BitAnd, ast.BitOr, ast.BitXor)


def _bound_names(tree: ast.AST) -> set[str]:
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.alias):
            bound.add(node.asname or node.name.split(".")[0])
    return bound


class _Normalise(ast.NodeTransformer):
    def __init__(self, bound: set[str], commutative: bool) -> None:
        self.bound, self.commutative = bound, commutative
        self.names: dict[str, str] = {}

    def _rename(self, name: str) -> str:
        if name not in self.bound:
            return name
        return self.names.setdefault(name, f"v{len(self.names)}")

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.Name(id=self._rename(node.id), ctx=node.ctx)

    def visit_arg(self, node: ast.arg) -> ast.AST:
        self.generic_visit(node)
        node.arg = self._rename(node.arg)
        node.type_comment = None
        return node

    def visit_alias(self, node: ast.alias) -> ast.AST:
        if node.asname is not None:
            node.asname = self._rename(node.asname)
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        if self.commutative and isinstance(node.op, _COMMUTATIVE_BINOPS):
            left, right = sorted((node.left, node.right), key=ast.dump)
            node.left, node.right = left, right
        return node

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        if (self.commutative and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq))):
            left, right = sorted((node.left, node.comparators[0]), key=ast.dump)
            node.left, node.comparators = left, [right]
        return node

    def generic_visit(self, node: ast.AST) -> ast.AST:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            node.name = self._rename(node.name)
        body = getattr(node, "body", None)
        if isinstance(body, list):
            node.body = [  # type: ignore[attr-defined]
                s for i, s in enumerate(body)
                if not isinstance(s, ast.Pass)
                and not (i == 0 and isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
                         and isinstance(s.value.value, str))
            ]
        return super().generic_visit(node)


def normalize_source(code: str, *, commutative: bool = False) -> str:
    """The normalised tree of ``code`` as ``ast.dump`` text (raises ``SyntaxError``)."""
    tree = ast.parse(code)
    tree = _Normalise(_bound_names(tree), commutative).visit(tree)
    return ast.dump(tree, annotate_fields=False, include_attributes=False)


@registry.cluster("ast_hash")
class ASTHashCluster:
    """Hash of the alpha-renamed, docstring-free syntax tree (module docstring)."""

    def __init__(self, *, commutative: bool = False, on_error: str | None = "astn:invalid") -> None:
        self.commutative = bool(commutative)
        self.on_error = on_error

    def __call__(self, item: Any) -> str:
        inp = unpack(item)
        code = inp.metadata.get("code")
        code = str(code) if code is not None else extract_code(inp.text)
        try:
            dumped = normalize_source(code.strip(), commutative=self.commutative)
        except (SyntaxError, ValueError) as exc:
            if self.on_error is None:
                raise ValueError(f"ast_hash clusterer: code does not parse: {exc}") from exc
            return self.on_error
        return "astn:" + stable_hash(dumped)
