"""The offline mutation operator ``ast``: random syntax-tree edits, no model needed.

Each child applies 1..``max_edits`` edits, drawn with probability proportional to
``weights`` among the kinds that have a site in the program:

* ``constant``: perturb a numeric literal, multiplicatively (``v * exp(N(0, sigma^2))``)
  or additively (``v + N(0, (sigma * max(|v|, 1))^2)``), with equal chance; integers stay
  integers (rounded, and moved by 1 when rounding undoes the change); floats keep 6
  significant digits; a negative result is written as a unary minus.
* ``operator``: swap an arithmetic operator for a related one (``+``/``-``, ``*``/``/``,
  ``/``/``//``, ...; augmented assignments too) or ``and``/``or``.
* ``compare``: swap a comparison (``<``/``<=``/``>``/``>=``, ``==``/``!=``, ``in``/``not in``,
  ``is``/``is not``).
* ``delete``: remove a statement from a block of two or more (never a ``def``, ``class``,
  import or docstring).
* ``duplicate``: insert a copy of a statement right after it (not a ``def``, ``class``,
  import, ``return``/``raise``/``break``/``continue``/``pass`` or docstring).
* ``reorder``: swap two adjacent statements (a docstring stays first).

Edits happen only inside ``EVOLVE-BLOCK`` regions (the whole program when it has no
markers); a region that does not parse on its own is left alone. Edited regions are
dedented, parsed and edited; the edit is written back as a textual patch of the region
(:func:`~qdevolve.mutation._ast_patch.patch_source`: only the changed expression or the moved,
copied or removed statement lines are rewritten), so every byte outside the edited lines stays
as it was, comments and formatting included. Only when a patch would not parse back to the
edited tree is the whole region written with :func:`ast.unparse` and re-indented with its
original margin (its comments then lost); text outside the regions is never touched. A child is kept only when the
whole program compiles, the region text round-trips to the edited tree, and the program
differs from the parent and from the other children; otherwise another set of edits is
drawn, up to ``max_attempts`` times.

Randomness: ``propose`` draws one integer from ``context.rng`` and seeds a private
generator with it and ``seed_offset``, so the run's generator advances by exactly one draw
per call however many retries happen, and the same ``context.rng`` state gives the same
children.
"""

from __future__ import annotations

import ast
import copy
import io
import math
import os
import tokenize
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from qdevolve import registry
from qdevolve.errors import ConfigError
from qdevolve.mutation._ast_patch import patch_source
from qdevolve.mutation.base import Candidate, MutationContext
from qdevolve.mutation.blocks import find_blocks, splice_blocks
from qdevolve.mutation.tree_edit import ast_mutate_tree
from qdevolve.programtree import is_tree
from qdevolve.types import Program

__all__ = ["ASTMutation", "EDIT_KINDS", "python_only_message"]

EDIT_KINDS: tuple[str, ...] = ("constant", "operator", "compare", "delete", "duplicate", "reorder")
DEFAULT_WEIGHTS: dict[str, float] = {"constant": 3.0, "operator": 1.0, "compare": 1.0,
                                     "delete": 0.5, "duplicate": 0.5, "reorder": 0.5}

_BINOP_SWAPS: dict[type, tuple[type, ...]] = {
    ast.Add: (ast.Sub, ast.Mult), ast.Sub: (ast.Add,), ast.Mult: (ast.Div, ast.Add, ast.Pow),
    ast.Div: (ast.Mult, ast.FloorDiv), ast.FloorDiv: (ast.Div, ast.Mod), ast.Mod: (ast.FloorDiv,),
    ast.Pow: (ast.Mult,),
}
_BOOL_SWAPS: dict[type, tuple[type, ...]] = {ast.And: (ast.Or,), ast.Or: (ast.And,)}
_CMP_SWAPS: dict[type, tuple[type, ...]] = {
    ast.Lt: (ast.LtE, ast.Gt), ast.LtE: (ast.Lt, ast.GtE), ast.Gt: (ast.GtE, ast.Lt),
    ast.GtE: (ast.Gt, ast.LtE), ast.Eq: (ast.NotEq,), ast.NotEq: (ast.Eq,),
    ast.In: (ast.NotIn,), ast.NotIn: (ast.In,), ast.Is: (ast.IsNot,), ast.IsNot: (ast.Is,),
}
_STRUCTURAL = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)
_NO_DUPLICATE = _STRUCTURAL + (ast.Return, ast.Raise, ast.Break, ast.Continue, ast.Pass, ast.Global, ast.Nonlocal)


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def _continuation_lines(text: str) -> set[int]:
    """0-based indices of lines that continue a multi-line token (string contents)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return set()
    lines: set[int] = set()
    for tok in tokens:
        if tok.end[0] > tok.start[0] and tok.type not in (tokenize.NEWLINE, tokenize.NL):
            lines.update(range(tok.start[0], tok.end[0]))  # 1-based start+1 .. end, as 0-based
    return lines


def _margin(body: str) -> str:
    """Common leading whitespace of the code lines (not blank, comment-only or string contents)."""
    skip = _continuation_lines(body)
    lines = [ln for i, ln in enumerate(body.splitlines())
             if i not in skip and ln.strip() and not ln.lstrip().startswith("#")]
    if not lines:
        return ""
    prefixes = [ln[: len(ln) - len(ln.lstrip())] for ln in lines]
    return os.path.commonprefix(prefixes)


def _dedent(body: str, margin: str) -> str:
    """``body`` without ``margin``; the contents of multi-line strings stay byte-identical."""
    skip = _continuation_lines(body)
    out = []
    for i, ln in enumerate(body.splitlines()):
        if i in skip:
            out.append(ln)
        elif ln.startswith(margin):
            out.append(ln[len(margin):])
        else:
            out.append(ln.lstrip() if not ln.strip() or ln.lstrip().startswith("#") else ln)
    return "\n".join(out) + ("\n" if body.endswith("\n") else "")


def _reindent(text: str, margin: str) -> str:
    """``text`` with ``margin`` before each code line (not before multi-line string contents)."""
    skip = _continuation_lines(text)
    return "\n".join(ln if i in skip else (margin + ln if ln.strip() else "")
                     for i, ln in enumerate(text.split("\n")))


@dataclass
class _Region:
    index: int  # block index
    margin: str
    source: str  # dedented body
    first_line: int  # program line number of the body's first line
    dump: str  # ast.dump of the original body


@dataclass
class _Site:
    kind: str
    region: int
    apply: Callable[[np.random.Generator], str]


def python_only_message(language: str) -> str:
    """Why the ``ast`` mutator cannot edit a ``language`` program, and what to use instead."""
    return (f"the 'ast' mutator edits Python programs only (it parses them with Python's ast "
            f"module); this program is {language}: use the model operators (mutation: diff, "
            f"rewrite, crossover) with a backend, e.g. --backend openai --model NAME --api-base URL")


@registry.mutation("ast")
class ASTMutation:
    """Offline syntax-tree mutations inside EVOLVE-BLOCK regions (``n_parents = 1``).

    Args:
        seed_offset: Mixed into the private generator's seed (decorrelates two operators
            sharing one run generator).
        max_edits: Edits per child are drawn uniformly from 1..max_edits.
        max_attempts: Edit sets tried per child before giving up (the child is then a
            failed candidate with ``code=None`` and an ``error``).
        sigma: Relative scale of constant perturbations.
        weights: Relative frequency of each edit kind (keys from :data:`EDIT_KINDS`;
            missing kinds keep their defaults, 0 disables a kind).

    Raises:
        ConfigError: an option is invalid.
    """

    n_parents = 1
    needs_backend = False
    name = "ast"

    def __init__(self, seed_offset: int = 0, max_edits: int = 3, max_attempts: int = 30,
                 sigma: float = 0.2, weights: dict[str, float] | None = None) -> None:
        if int(max_edits) < 1:
            raise ConfigError(f"ast mutation max_edits must be >= 1, got {max_edits}")
        if int(max_attempts) < 1:
            raise ConfigError(f"ast mutation max_attempts must be >= 1, got {max_attempts}")
        if not float(sigma) > 0:
            raise ConfigError(f"ast mutation sigma must be > 0, got {sigma}")
        if int(seed_offset) < 0:
            raise ConfigError(f"ast mutation seed_offset must be >= 0, got {seed_offset}")
        w = dict(DEFAULT_WEIGHTS)
        for k, v in (weights or {}).items():
            if k not in EDIT_KINDS:
                raise ConfigError(f"ast mutation weights: unknown edit kind {k!r}; kinds are {', '.join(EDIT_KINDS)}")
            if float(v) < 0:
                raise ConfigError(f"ast mutation weight of {k!r} must be >= 0, got {v}")
            w[k] = float(v)
        if sum(w.values()) <= 0:
            raise ConfigError("ast mutation weights are all zero; enable at least one edit kind")
        self.seed_offset = int(seed_offset)
        self.max_edits = int(max_edits)
        self.max_attempts = int(max_attempts)
        self.sigma = float(sigma)
        self.weights = w

    async def propose(self, parent: Program, context: MutationContext, backend: Any = None) -> list[Candidate]:
        """``context.n`` children of ``parent`` (failed ones have ``code=None``)."""
        rng = np.random.default_rng([int(context.rng.integers(0, 2**63 - 1)), self.seed_offset])
        if parent.language != "python" and not is_tree(parent.code):
            why = python_only_message(parent.language)
            return [Candidate(code=None, operator="ast", parent_ids=(parent.id,), error=why)
                    for _ in range(max(int(context.n), 0))]
        seen = {parent.code}
        out = []
        for _ in range(max(int(context.n), 0)):
            if is_tree(parent.code):  # one Python file of the tree at a time
                code, edits, error = ast_mutate_tree(self.mutate_code, parent.code, rng, seen)
            else:
                code, edits, error = self.mutate_code(parent.code, rng, exclude=seen)
            if code is not None:
                seen.add(code)
            out.append(Candidate(code=code, operator="ast", parent_ids=(parent.id,), error=error,
                                 metadata={"edits": edits} if code is not None else {}))
        return out

    # -- the edit loop ------------------------------------------------------------------
    def mutate_code(self, code: str, rng: np.random.Generator, *,
                    exclude: set[str] | None = None) -> tuple[str | None, list[str], str | None]:
        """One child of ``code``: ``(new_code, edit descriptions, None)`` or ``(None, [], error)``."""
        try:
            blocks = find_blocks(code)
        except ValueError as exc:
            return None, [], f"ast mutation: {exc}"
        bodies = [code[b.start:b.end] for b in blocks]
        regions: list[_Region] = []
        for i, (b, body) in enumerate(zip(blocks, bodies, strict=False)):
            margin = _margin(body)
            src = _dedent(body, margin)
            try:
                tree = ast.parse(src)
            except SyntaxError:
                continue
            regions.append(_Region(i, margin, src, code[:b.start].count("\n") + 1, ast.dump(tree)))
        if not regions:
            return None, [], "ast mutation: no EVOLVE-BLOCK region parses as Python on its own"
        exclude = exclude if exclude is not None else {code}
        reasons: dict[str, int] = {}
        for _ in range(self.max_attempts):
            trees = [ast.parse(r.source) for r in regions]
            edits: list[str] = []
            for _ in range(int(rng.integers(1, self.max_edits + 1))):
                edit = self._one_edit(trees, regions, rng)
                if edit is None:
                    break
                edits.append(edit)
            if not edits:
                return None, [], "ast mutation: the EVOLVE-BLOCK regions offer no site to edit"
            new_bodies = list(bodies)
            changed = False
            for r, tree in zip(regions, trees, strict=False):
                if ast.dump(tree) == r.dump:
                    continue
                changed = True
                new_bodies[r.index] = self._write(bodies[r.index], r, tree)
            why = self._check(code, new_bodies, regions, trees, changed, exclude)
            if isinstance(why, str):
                reasons[why] = reasons.get(why, 0) + 1
                continue
            return why[0], edits, None
        summary = ", ".join(f"{k} x{v}" for k, v in sorted(reasons.items()))
        return None, [], f"ast mutation: no valid child in {self.max_attempts} attempts ({summary})"

    @staticmethod
    def _write(body: str, region: _Region, tree: ast.Module) -> str:
        """The region's new text: a patch of its own text where that parses back to ``tree``,
        else the whole region unparsed (comments inside it then lost)."""
        want = ast.dump(tree)
        for parenthesize in (False, True):
            text = patch_source(body, region.source, ast.parse(region.source), tree, parenthesize=parenthesize)
            if text is None:
                break
            try:
                if ast.dump(ast.parse(_dedent(text, region.margin))) == want:
                    return text
            except SyntaxError:
                continue
        text = _reindent(ast.unparse(tree), region.margin)
        return text + "\n" if text else ""

    def _check(self, code: str, new_bodies: list[str], regions: list[_Region], trees: list[ast.Module],
               changed: bool, exclude: set[str]) -> str | tuple[str]:
        if not changed:
            return "unchanged"
        new_code = splice_blocks(code, new_bodies)
        if new_code in exclude:
            return "duplicate"
        try:
            compile(new_code, "<ast-mutation>", "exec", dont_inherit=True)
        except (SyntaxError, ValueError):
            return "does not compile"
        new_blocks = find_blocks(new_code)
        for r, tree in zip(regions, trees, strict=False):
            b = new_blocks[r.index]
            body = new_code[b.start:b.end]
            try:
                if ast.dump(ast.parse(_dedent(body, r.margin))) != ast.dump(tree):
                    return "round-trip mismatch"
            except SyntaxError:
                return "region does not parse"
        return (new_code,)

    def _one_edit(self, trees: list[ast.Module], regions: list[_Region], rng: np.random.Generator) -> str | None:
        sites: dict[str, list[_Site]] = {k: [] for k in EDIT_KINDS}
        for ri, tree in enumerate(trees):
            self._collect(tree, ri, regions[ri], sites)
        kinds = [k for k in EDIT_KINDS if sites[k] and self.weights[k] > 0]
        if not kinds:
            return None
        w = np.array([self.weights[k] for k in kinds])
        kind = kinds[int(rng.choice(len(kinds), p=w / w.sum()))]
        site = sites[kind][int(rng.integers(len(sites[kind])))]
        return site.apply(rng)

    # -- sites --------------------------------------------------------------------------
    def _collect(self, tree: ast.Module, ri: int, region: _Region, sites: dict[str, list[_Site]]) -> None:
        def line(node: ast.AST) -> str:
            n = getattr(node, "lineno", None)
            return f" (line {region.first_line + n - 1})" if n is not None else ""

        for node in ast.walk(tree):
            for field_name, value in list(ast.iter_fields(node)):
                if isinstance(value, ast.Constant) and _is_number(value.value):
                    sites["constant"].append(_Site("constant", ri, self._constant_edit(node, field_name, None, value, line(value))))
                elif isinstance(value, list):
                    for idx, item in enumerate(value):
                        if isinstance(item, ast.Constant) and _is_number(item.value):
                            sites["constant"].append(_Site("constant", ri, self._constant_edit(node, field_name, idx, item, line(item))))
            if isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in _BINOP_SWAPS:
                sites["operator"].append(_Site("operator", ri, _swap_edit(node, "op", _BINOP_SWAPS, line(node))))
            elif isinstance(node, ast.BoolOp):
                sites["operator"].append(_Site("operator", ri, _swap_edit(node, "op", _BOOL_SWAPS, line(node))))
            elif isinstance(node, ast.Compare):
                for k, op in enumerate(node.ops):
                    if type(op) in _CMP_SWAPS:
                        sites["compare"].append(_Site("compare", ri, _compare_edit(node, k, line(node))))
            for field_name in ("body", "orelse", "finalbody"):
                stmts = getattr(node, field_name, None)
                if not isinstance(stmts, list) or not stmts or not isinstance(stmts[0], ast.stmt):
                    continue
                for i, stmt in enumerate(stmts):
                    if len(stmts) > 1 and not isinstance(stmt, _STRUCTURAL) and not _is_docstring(stmt):
                        sites["delete"].append(_Site("delete", ri, _delete_edit(stmts, i, line(stmt))))
                    if not isinstance(stmt, _NO_DUPLICATE) and not _is_docstring(stmt):
                        sites["duplicate"].append(_Site("duplicate", ri, _duplicate_edit(stmts, i, line(stmt))))
                    if (i + 1 < len(stmts) and not _is_docstring(stmt)
                            and ast.dump(stmt) != ast.dump(stmts[i + 1])):
                        sites["reorder"].append(_Site("reorder", ri, _reorder_edit(stmts, i, line(stmt))))

    def _constant_edit(self, parent: ast.AST, field_name: str, idx: int | None, node: ast.Constant,
                       where: str) -> Callable[[np.random.Generator], str]:
        def apply(rng: np.random.Generator) -> str:
            old = node.value
            new = self._perturb(old, rng)
            repl: ast.expr = ast.Constant(value=new) if new >= 0 else ast.UnaryOp(op=ast.USub(), operand=ast.Constant(value=-new))
            if idx is None:
                setattr(parent, field_name, repl)
            else:
                getattr(parent, field_name)[idx] = repl
            return f"constant {old!r} -> {new!r}{where}"

        return apply

    def _perturb(self, v: int | float, rng: np.random.Generator) -> int | float:
        multiplicative = bool(rng.integers(2)) and v != 0
        if multiplicative:
            x = v * math.exp(float(rng.normal(0.0, self.sigma)))
        else:
            x = v + float(rng.normal(0.0, self.sigma * max(abs(v), 1.0)))
        if isinstance(v, int):
            new_int = int(round(x))
            if new_int == v:
                new_int = v + (1 if rng.integers(2) else -1)
            return new_int
        new = float(f"{x:.6g}")
        if new == v:
            new = float(f"{v + self.sigma * max(abs(v), 1.0):.6g}")
        return new


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _swap_edit(node: Any, attr: str, table: dict[type, tuple[type, ...]], where: str) -> Callable[[np.random.Generator], str]:
    def apply(rng: np.random.Generator) -> str:
        old = type(getattr(node, attr))
        choices = table[old]
        new = choices[int(rng.integers(len(choices)))]
        setattr(node, attr, new())
        return f"operator {old.__name__} -> {new.__name__}{where}"

    return apply


def _compare_edit(node: ast.Compare, k: int, where: str) -> Callable[[np.random.Generator], str]:
    def apply(rng: np.random.Generator) -> str:
        old = type(node.ops[k])
        choices = _CMP_SWAPS[old]
        new = choices[int(rng.integers(len(choices)))]
        node.ops[k] = new()
        return f"compare {old.__name__} -> {new.__name__}{where}"

    return apply


def _delete_edit(stmts: list[ast.stmt], i: int, where: str) -> Callable[[np.random.Generator], str]:
    def apply(rng: np.random.Generator) -> str:
        if len(stmts) < 2 or i >= len(stmts):
            return "delete skipped"
        kind = type(stmts[i]).__name__
        del stmts[i]
        return f"delete {kind}{where}"

    return apply


def _duplicate_edit(stmts: list[ast.stmt], i: int, where: str) -> Callable[[np.random.Generator], str]:
    def apply(rng: np.random.Generator) -> str:
        if i >= len(stmts):
            return "duplicate skipped"
        stmts.insert(i + 1, copy.deepcopy(stmts[i]))
        return f"duplicate {type(stmts[i]).__name__}{where}"

    return apply


def _reorder_edit(stmts: list[ast.stmt], i: int, where: str) -> Callable[[np.random.Generator], str]:
    def apply(rng: np.random.Generator) -> str:
        if i + 1 >= len(stmts):
            return "reorder skipped"
        stmts[i], stmts[i + 1] = stmts[i + 1], stmts[i]
        return f"reorder statements{where}"

    return apply
