"""The fixed code stays fixed: an EVOLVE-BLOCK may not change what the code outside it means.

Comparing the text outside the markers (:func:`~qdevolve.mutation.blocks.edits_inside_blocks`)
is not enough: code inside a block can re-decorate, rebind or patch what lies outside it
(a decorator as the block's last line replaces the fixed function below it). This module
checks the *parsed* program. With the block regions as line ranges, it reports:

1. **boundary** - a statement (with its decorators) that starts inside a block and ends
   outside it, or the reverse;
2. **rebinding** - a name bound outside the block in the same scope (module, class or
   function) bound again inside it: assignment, ``def``/``class``, ``import``, ``for``/
   ``with``/``except`` targets, walrus, ``match`` captures, ``del``, ``global``/``nonlocal``
   from a function in the block; star imports; dunder names (``__builtins__``,
   ``__getattr__``...); and a builtin the fixed code uses (``min``, ``sum``...) shadowed at
   module scope. Re-importing a module under the name the fixed code gave it is allowed;
3. **patching** - an attribute or item store/delete, or a mutating method call
   (``append``, ``update``...), on an object the block does not own: a name of the fixed
   code, a module, a builtin, or an alias of one (``m = math; m.hypot = f``);
   ``setattr``/``delattr`` on such an object;
4. **reflection** - the ways to reach a namespace indirectly: ``globals``, ``vars``,
   ``exec``, ``eval``, ``compile``, ``__import__``, module-level ``locals``, ``builtins`` /
   ``ctypes`` imports, ``sys.modules``, frames (``sys._getframe``, ``f_globals``...),
   ``gc`` referrers, and function internals (``__code__``, ``__globals__``, ``__dict__``...).

:func:`fixed_code_violation` compares a child with its parent and reports only what the
parent does not already do, so a seed that (say) imports ``builtins`` in its block can
still evolve. Programs without markers are evolvable as a whole and pass.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from qdevolve.mutation.blocks import END, START, find_blocks

__all__ = ["fixed_code_violations", "fixed_code_violation", "skeleton_change"]

_BUILTINS = frozenset(dir(builtins))
_DUNDER_OK = frozenset({"__all__", "__doc__", "__version__", "__author__", "__slots__", "__annotations__",
                        "__init__", "__repr__", "__str__", "__eq__", "__hash__", "__lt__", "__le__", "__gt__",
                        "__ge__", "__len__", "__iter__", "__next__", "__call__", "__getitem__", "__contains__",
                        "__enter__", "__exit__", "__add__", "__sub__", "__mul__", "__post_init__", "__new__"})
_REFLECTIVE_NAMES = frozenset({"globals", "vars", "exec", "eval", "compile", "__import__", "__builtins__"})
_FORBIDDEN_MODULES = frozenset({"builtins", "__builtin__", "ctypes", "_ctypes"})
_FORBIDDEN_ATTRS = frozenset({
    "__code__", "__globals__", "__builtins__", "__closure__", "__defaults__", "__kwdefaults__", "__dict__",
    "__setattr__", "__delattr__", "f_globals", "f_locals", "f_back", "f_builtins", "tb_frame", "gi_frame",
    "cr_frame", "ag_frame", "_getframe", "settrace", "setprofile", "get_referrers", "get_referents",
    "get_objects", "currentframe", "getouterframes", "meta_path", "path_hooks", "import_module", "reload",
})
_SYS_ATTRS = frozenset({"modules"})
_MUTATORS = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "popitem",
                       "add", "discard", "sort", "reverse", "__setitem__", "__delitem__", "__iadd__", "__imul__",
                       "fill", "put", "itemset", "resize", "setflags", "setfield", "partition"})


@dataclass
class _Scope:
    """One namespace: what the fixed code and the blocks bind in it."""

    skeleton: dict[str, list[ast.AST]] = field(default_factory=dict)  # name -> binding nodes outside blocks
    block: dict[str, list[ast.AST]] = field(default_factory=dict)  # name -> binding nodes inside blocks
    block_stmts: list[ast.stmt] = field(default_factory=list)
    skeleton_stmts: list[ast.stmt] = field(default_factory=list)
    module: bool = False


def _span(stmt: ast.stmt) -> tuple[int, int]:
    first = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])])
    return first, stmt.end_lineno or stmt.lineno


def _child_bodies(stmt: ast.stmt) -> Iterator[list[ast.stmt]]:
    for name in ("body", "orelse", "finalbody"):
        body = getattr(stmt, name, None)
        if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
            yield body
    for h in getattr(stmt, "handlers", []) or []:
        yield h.body
    for c in getattr(stmt, "cases", []) or []:
        yield c.body


def _bindings(stmts: list[ast.stmt]) -> Iterator[tuple[str, ast.AST]]:
    """``(name, node)`` for every name ``stmts`` bind in their own scope (not nested scopes)."""
    todo: list[ast.AST] = list(stmts)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.name, node
            todo += node.decorator_list
            if isinstance(node, ast.ClassDef):
                todo += node.bases + [k.value for k in node.keywords]
            else:
                todo += [d for d in node.args.defaults + node.args.kw_defaults if d is not None]
            continue
        if isinstance(node, ast.Lambda):
            todo += [d for d in node.args.defaults + node.args.kw_defaults if d is not None]
            continue
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            todo += [n for n in ast.walk(node) if isinstance(n, ast.NamedExpr)]
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            yield node.id, node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                yield (alias.asname or alias.name.split(".")[0]), node
        elif isinstance(node, ast.ExceptHandler) and node.name:
            yield node.name, node
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            yield node.name, node
        elif isinstance(node, ast.MatchMapping) and node.rest:
            yield node.rest, node
        todo += list(ast.iter_child_nodes(node))


def _module_level(stmts: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements run at module level: ``stmts`` and the bodies of ``if``/``try``/``with``/``for``."""
    todo = list(stmts)
    while todo:
        st = todo.pop()
        yield st
        if not isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for body in _child_bodies(st):
                todo += body


def _import_key(node: ast.AST, name: str) -> tuple[str, ...] | None:
    """What an import binds ``name`` to (``None`` for bindings that are not imports)."""
    if isinstance(node, ast.Import):
        for a in node.names:
            if (a.asname or a.name.split(".")[0]) == name:
                return ("import", a.name if a.asname else a.name.split(".")[0])
    if isinstance(node, ast.ImportFrom):
        for a in node.names:
            if (a.asname or a.name) == name:
                return ("from", "." * node.level + (node.module or ""), a.name)
    return None


class _Checker:
    """Finds the violations of one program (see the module docstring)."""

    def __init__(self, code: str) -> None:
        self.tree = ast.parse(code)
        self.ranges = []
        for b in find_blocks(code) if START in code else []:  # no markers: evolvable as a whole
            first, last = code.count("\n", 0, b.start) + 1, code.count("\n", 0, b.end)
            if last >= first:
                self.ranges.append((first, last))
        self.found: dict[str, str] = {}
        self.module_skeleton: dict[str, list[ast.AST]] = {}
        self.modules: set[str] = set()  # names bound to modules at module level (imports)
        self.sys_names: set[str] = {"sys"}
        # Cheap text pre-checks (conservative: a comment can only make the check slower).
        self.has_declarations = re.search(r"\b(global|nonlocal)\b", code) is not None
        self.has_star = re.search(r"import\s*\*|import\s*\(\s*\*", code) is not None
        for node in _module_level(self.tree.body):
            if isinstance(node, ast.Import):
                for a in node.names:
                    bound = a.asname or a.name.split(".")[0]
                    self.modules.add(bound)
                    if a.name == "sys":
                        self.sys_names.add(bound)

    def add(self, key: str, message: str) -> None:
        self.found.setdefault(key, message)

    def run(self) -> dict[str, str]:
        if self.ranges:
            self._scope(self.tree.body, "module", module=True)
        return self.found

    def _where(self, span: tuple[int, int]) -> str:
        """'in', 'out', 'around' (starts before a block and overlaps it: look inside) or 'cross'."""
        first, last = span
        for a, b in self.ranges:
            if a <= first and last <= b:
                return "in"
            if last < a or first > b:
                continue
            return "around" if first < a else "cross"
        return "out"

    def _scope(self, body: list[ast.stmt], label: str, *, module: bool = False) -> None:
        scope = _Scope(module=module)
        nested: list[tuple[list[ast.stmt], str]] = []
        self._partition(body, scope, label, nested)
        for name, node in _bindings(scope.skeleton_stmts):
            scope.skeleton.setdefault(name, []).append(node)
        for name, node in _bindings(scope.block_stmts):
            scope.block.setdefault(name, []).append(node)
        if module:
            self.module_skeleton = scope.skeleton
        if scope.block_stmts:
            self._check_bindings(scope, label)
            _Patrol(self, scope).run(scope.block_stmts)
        for sub_body, sub_label in nested:
            self._scope(sub_body, sub_label)

    def _partition(self, body: list[ast.stmt], scope: _Scope, label: str,
                   nested: list[tuple[list[ast.stmt], str]]) -> None:
        for stmt in body:
            where = self._where(_span(stmt))
            if where == "in":
                scope.block_stmts.append(stmt)
            elif where == "out":
                scope.skeleton_stmts.append(stmt)
            elif where == "around" and isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                scope.skeleton_stmts.append(_shallow(stmt))
                nested.append((stmt.body, f"{label}.{stmt.name}"))
            elif where == "around" and any(True for _ in _child_bodies(stmt)):
                scope.skeleton_stmts.append(_shallow(stmt))  # if/for/while/with/try: same scope
                for sub in _child_bodies(stmt):
                    self._partition(sub, scope, label, nested)
            else:
                first, last = _span(stmt)
                self.add(f"boundary:{first}", f"a statement (lines {first}-{last}) crosses an EVOLVE-BLOCK "
                         "marker: every statement must lie wholly inside or wholly outside a block")

    def _check_bindings(self, scope: _Scope, label: str) -> None:
        shadowing = {n for n in scope.block if n in _BUILTINS} if scope.module else set()
        skeleton_loads = {n.id for s in scope.skeleton_stmts for n in ast.walk(s)
                          if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} if shadowing else set()
        rebound = dict(scope.block)
        functions = (n for s in scope.block_stmts for n in ast.walk(s)
                     if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))) if self.has_declarations else ()
        for fn in functions:
            local = {name for name, _ in _bindings(fn.body)}
            for st in ast.walk(fn):
                if isinstance(st, ast.Global) and not scope.module:
                    for name in set(st.names) & local & set(self.module_skeleton):
                        self.add(f"rebind:module:{name}", f"the EVOLVE-BLOCK rebinds '{name}' (through 'global'), "
                                 "which the fixed code outside the block defines")
                elif isinstance(st, (ast.Global, ast.Nonlocal)):
                    for name in set(st.names) & local:
                        rebound.setdefault(name, []).append(fn)
        for name, nodes in rebound.items():
            if any(isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names) for n in nodes):
                continue
            if name in scope.skeleton:
                outer = {_import_key(n, name) for n in scope.skeleton[name]}
                inner = {_import_key(n, name) for n in nodes}
                if None in outer or None in inner or not inner <= outer:
                    self.add(f"rebind:{label}:{name}", f"the EVOLVE-BLOCK rebinds '{name}', which the fixed "
                             f"code outside the block defines ({label} scope)")
            elif name.startswith("__") and name.endswith("__") and name not in _DUNDER_OK and scope.module:
                self.add(f"dunder:{name}", f"the EVOLVE-BLOCK binds the module attribute '{name}'")
            elif scope.module and name in _BUILTINS and name in skeleton_loads:
                self.add(f"builtin:{name}", f"the EVOLVE-BLOCK shadows the builtin '{name}', which the fixed "
                         "code outside the block uses")
        for s in scope.block_stmts:
            for n in ast.walk(s) if isinstance(s, ast.ImportFrom) or self.has_star else ():
                if isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names):
                    self.add(f"star:{n.module}", f"'from {n.module} import *' in an EVOLVE-BLOCK may rebind "
                             "names of the fixed code; import names explicitly")


def _shallow(stmt: ast.stmt) -> ast.stmt:
    """``stmt`` with its statement bodies emptied (its header expressions stay)."""
    clone = type(stmt)()
    for name in stmt._fields:
        value = getattr(stmt, name)
        is_body = isinstance(value, list) and value and isinstance(value[0], (ast.stmt, ast.excepthandler,
                                                                              ast.match_case))
        setattr(clone, name, [] if is_body else value)
    return clone


class _Patrol(ast.NodeVisitor):
    """Finds patching and reflection in one block statement (its function bodies included)."""

    def __init__(self, checker: _Checker, scope: _Scope) -> None:
        self.c, self.scope = checker, scope
        self.owned = set(scope.block) - set(scope.skeleton)  # names only the block binds
        self.locals: list[set[str]] = []  # local names of the block functions being visited
        self.tainted: set[str] = set()  # block names bound to outer objects (aliases)

    def run(self, stmts: list[ast.stmt]) -> None:
        for name, node in _bindings(stmts):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                self.tainted.add(name)
        assigns = [n for s in stmts for n in ast.walk(s)
                   if isinstance(n, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and n.value is not None]
        for _ in range(3):  # aliases of aliases
            for node in assigns:
                if self._outer(node.value):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    self.tainted |= {t.id for t in targets if isinstance(t, ast.Name)}
        for stmt in stmts:
            self.visit(stmt)

    # -- what counts as an object the block does not own ------------------------------------
    def _root(self, expr: ast.AST) -> ast.AST:
        while isinstance(expr, (ast.Attribute, ast.Subscript, ast.Starred)):
            expr = expr.value
        return expr

    def _outer_name(self, name: str) -> bool:
        if any(name in frame for frame in self.locals) and name not in self.tainted:
            return False
        if name in self.tainted or name in self.scope.skeleton or name in self.c.modules:
            return True
        return name not in self.owned and name in _BUILTINS

    def _outer(self, expr: ast.AST) -> bool:
        root = self._root(expr)
        if isinstance(root, ast.Name):
            return self._outer_name(root.id)
        if isinstance(root, ast.Call):
            f = root.func
            fname = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            return fname in {"getattr", "__import__", "import_module", "vars", "globals", "locals"}
        return False

    def _flag(self, node: ast.AST, what: str) -> None:
        self.c.add(f"patch:{getattr(node, 'lineno', 0)}:{what}", f"line {getattr(node, 'lineno', '?')}: the "
                   f"EVOLVE-BLOCK {what}; a block may only change objects it creates")

    # -- visitors ---------------------------------------------------------------------------
    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        a = node.args
        params = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
        params |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
        body = node.body if isinstance(node.body, list) else [ast.Expr(node.body)]
        declared = {n for st in ast.walk(node) if isinstance(st, (ast.Global, ast.Nonlocal))
                    for n in st.names} if self.c.has_declarations else set()
        self.locals.append((params | {name for name, _ in _bindings(body)}) - declared)
        self.generic_visit(node)
        self.locals.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def _store_target(self, target: ast.AST, verb: str) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                self._store_target(t, verb)
        elif isinstance(target, ast.Starred):
            self._store_target(target.value, verb)
        elif isinstance(target, (ast.Attribute, ast.Subscript)) and self._outer(target.value):
            self._flag(target, f"{verb} {ast.unparse(target)[:60]!r} on an object of the fixed code, a module "
                       "or a builtin")

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self._store_target(t, "assigns")
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._store_target(node.target, "updates")
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._store_target(node.target, "assigns")
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            self._store_target(t, "deletes")
        self.generic_visit(node)

    def visit_For(self, node: ast.For) -> None:
        self._store_target(node.target, "assigns")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load) and node.id in _REFLECTIVE_NAMES and node.id not in self.owned:
            self._flag(node, f"uses '{node.id}', which can rewrite any namespace")
        if node.id == "locals" and not self.locals and self.scope.module:
            self._flag(node, "uses module-level 'locals()' (the module namespace)")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        root = self._root(node)
        if node.attr in _FORBIDDEN_ATTRS or (node.attr in _SYS_ATTRS and isinstance(root, ast.Name)
                                              and root.id in self.c.sys_names):
            self._flag(node, f"touches '.{node.attr}', a way into other code's namespace or frames")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        if isinstance(f, ast.Name) and f.id in ("setattr", "delattr") and node.args and self._outer(node.args[0]):
            self._flag(node, f"calls {f.id}() on an object of the fixed code, a module or a builtin")
        if isinstance(f, ast.Name) and f.id in ("getattr", "setattr", "delattr", "hasattr") and len(node.args) > 1:
            name = node.args[1]
            if not isinstance(name, ast.Constant):
                if f.id != "hasattr" and self._outer(node.args[0]):
                    self._flag(node, f"calls {f.id}() with a computed name on an object it does not own")
            elif name.value in _FORBIDDEN_ATTRS or name.value in _SYS_ATTRS:
                self._flag(node, f"reaches '.{name.value}' through {f.id}()")
        receiver_is_namespace = isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and (
            f.value.id in self.c.modules or f.value.id in _BUILTINS) and f.value.id not in self.tainted - self.c.modules
        if isinstance(f, ast.Attribute) and f.attr in _MUTATORS and not receiver_is_namespace and self._outer(f.value):
            self._flag(node, f"mutates {ast.unparse(f.value)[:40]!r} (.{f.attr}), which it does not own")
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            if a.name.split(".")[0] in _FORBIDDEN_MODULES:
                self._flag(node, f"imports '{a.name}'")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        mod = (node.module or "").split(".")[0]
        if mod in _FORBIDDEN_MODULES or (mod == "sys" and any(a.name in _SYS_ATTRS | _FORBIDDEN_ATTRS
                                                              for a in node.names)):
            self._flag(node, f"imports from '{node.module}'")


def fixed_code_violations(code: str) -> dict[str, str]:
    """Every way the EVOLVE-BLOCK regions of Python ``code`` change the code outside them.

    Returns:
        ``{key: message}``; keys identify a violation independently of line numbers where
        they can, so a child can be compared with its parent. Empty when the code has no
        markers, or does not parse (the syntax check reports that).
    """
    try:
        return _Checker(code).run()
    except (SyntaxError, ValueError, RecursionError):
        return {}


def skeleton_change(parent_code: str, child_code: str) -> str | None:
    """How ``child_code`` changes the text outside its parent's EVOLVE-BLOCK regions, or ``None``.

    A parent without markers is evolvable as a whole (``None``). Otherwise the child must have
    as many regions, and the text around them (docstrings, constants and comments included)
    must be the parent's, character for character: an operator that rewrites the whole file
    (a regex over every float literal, say) is caught here whatever it changed.
    """
    if START not in parent_code and END not in parent_code:
        return None
    try:
        parent_blocks = find_blocks(parent_code)
        child_blocks = find_blocks(child_code)
    except ValueError as exc:
        return f"the child's EVOLVE-BLOCK markers are broken ({exc})"
    if len(parent_blocks) != len(child_blocks):
        return (f"the child has {len(child_blocks)} EVOLVE-BLOCK region(s) where its parent has "
                f"{len(parent_blocks)}; edit only inside the existing markers")
    p_pos = c_pos = 0
    for pb, cb in [*zip(parent_blocks, child_blocks, strict=True), (None, None)]:
        p_end = len(parent_code) if pb is None else pb.start
        c_end = len(child_code) if cb is None else cb.start
        before, after = parent_code[p_pos:p_end], child_code[c_pos:c_end]
        if before != after:
            same = min(len(before), len(after))
            offset = next((i for i in range(same) if before[i] != after[i]), same)
            line_no = child_code.count("\n", 0, c_pos + offset) + 1
            lines = child_code.splitlines() or [""]
            line = lines[min(line_no, len(lines)) - 1]
            return (f"the child changes the code outside the EVOLVE-BLOCK (line {line_no}: "
                    f"{line.strip()[:60]!r}); a mutation may change only the text between the markers")
        if pb is not None and cb is not None:
            p_pos, c_pos = pb.end, cb.end
    return None


def fixed_code_violation(parent_code: str, child_code: str) -> str | None:
    """The first way ``child_code`` changes its parent's fixed code, or ``None``.

    Two checks: the text outside the EVOLVE-BLOCK regions is the parent's
    (:func:`skeleton_change`), and the regions do not change what that text means
    (:func:`fixed_code_violations`; only violations the parent does not already have count).
    """
    child = fixed_code_violations(child_code)
    if child:
        parent = {_unlined(k) for k in fixed_code_violations(parent_code)}
        for key, message in child.items():
            if _unlined(key) not in parent:
                return message
    return skeleton_change(parent_code, child_code)


def _unlined(key: str) -> str:
    """A violation key without its line number (lines shift between parent and child)."""
    parts = key.split(":")
    return ":".join(p for p in parts if not p.isdigit())
