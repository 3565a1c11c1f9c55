"""Every statement and every transaction on a run database belongs to ``qdevolve/db/``.

The engine, the archives and the CLI read and write through the store's named methods
(``LineageStore.write``, ``status_counts``, ``publish_migrants``...), so one module decides
what a transaction holds. This test reads every module of ``qdevolve/`` (syntax tree, calls
inside functions included) and fails on:

* a call of ``.execute``, ``.executemany``, ``.executescript`` or ``.exec_driver_sql``
  (SQL text, ``text(...)`` or a SQLAlchemy statement: the store's ``execute`` included)
  outside ``qdevolve/db/`` and the read-only viewer ``qdevolve/serve/``;
* a transaction opened or ended (``.begin``, ``._begin``, ``.begin_nested``, ``.commit``,
  ``.rollback``) outside ``qdevolve/db/``: the viewer included, it only reads.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "qdevolve"
STATEMENTS = {"execute", "executemany", "executescript", "exec_driver_sql"}
TRANSACTIONS = {"begin", "_begin", "begin_nested", "commit", "rollback"}
READ_ONLY_VIEWS = ("serve/",)  # may run statements (reads), never a transaction

#: Modules allowed a statement for a reason other than the run database, or pending a change
#: in a file another branch owns. Each names the reason; nothing else may be added silently.
ALLOWED_STATEMENTS = {
    "sandbox/attacks.py": "builds the host canary database an attack must not read (not a run database)",
}


def _calls(tree: ast.AST, names: set[str]) -> list[tuple[int, str]]:
    return [(node.lineno, node.func.attr) for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in names]


def _modules() -> list[tuple[str, ast.AST]]:
    return [(p.relative_to(PACKAGE).as_posix(), ast.parse(p.read_text(), str(p)))
            for p in sorted(PACKAGE.rglob("*.py")) if not p.relative_to(PACKAGE).as_posix().startswith("db/")]


def violations(modules: list[tuple[str, ast.AST]]) -> list[str]:
    """``path:line: what`` for every statement or transaction outside ``db/`` (module docstring)."""
    out = []
    for rel, tree in modules:
        if not rel.startswith(READ_ONLY_VIEWS) and rel not in ALLOWED_STATEMENTS:
            out += [f"qdevolve/{rel}:{line}: .{name}(...) runs SQL outside qdevolve/db/; add a named "
                    f"LineageStore method" for line, name in _calls(tree, STATEMENTS)]
        out += [f"qdevolve/{rel}:{line}: .{name}(...) opens or ends a transaction outside qdevolve/db/"
                for line, name in _calls(tree, TRANSACTIONS)]
    return out


def test_no_statement_or_transaction_outside_db() -> None:
    found = violations(_modules())
    assert not found, "\n".join(found)


def test_allowed_modules_still_exist_and_still_need_it() -> None:
    """An entry that no longer runs a statement is stale and must go (so the list only shrinks)."""
    trees = dict(_modules())
    for rel in ALLOWED_STATEMENTS:
        assert rel in trees, f"qdevolve/{rel}: listed in ALLOWED_STATEMENTS but gone"
        assert _calls(trees[rel], STATEMENTS), f"qdevolve/{rel}: runs no statement any more; drop it from the list"


@pytest.mark.parametrize(("source", "statement"), [
    ('def f(store):\n    return store.execute("SELECT COUNT(*) FROM evaluations")\n', True),
    ('def f(c):\n    c.exec_driver_sql("DELETE FROM programs")\n', True),
    ('def f(store):\n    with store._begin() as c:\n        pass\n', False),
    ('def f(con):\n    con.commit()\n', False),
])
def test_the_check_finds_sql_and_transactions(source: str, statement: bool) -> None:
    assert violations([("evolve/core/x.py", ast.parse(source))])
    if statement:
        assert not violations([("serve/x.py", ast.parse(source))]), "the viewer may read"
    else:
        assert violations([("serve/x.py", ast.parse(source))]), "the viewer never opens a transaction"
