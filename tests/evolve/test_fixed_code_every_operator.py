"""The engine applies the fixed-code check to the candidates of every operator kind: ``ast``,
``policy``, plugins (also one that names its candidates ``diff`` and a subclass of a built-in
LLM operator). A decorator placed as the EVOLVE-BLOCK's last line, which would re-decorate
the fixed ``value()`` below it, is refused as a failed mutation and never evaluated."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from qdevolve import registry
from qdevolve.db.store import LineageStore
from qdevolve.evolve.core.engine import Evolution
from qdevolve.evolve.setup.example import load_example
from qdevolve.mutation.base import Candidate
from qdevolve.mutation.diff import DiffMutation

from .conftest import SEED, write_example

# The seed's fixed part, unchanged to the byte; the EVOLVE-BLOCK's last line decorates it.
ATTACK = SEED.replace("B = 2.0\n# EVOLVE-BLOCK-END", '''B = 2.0


def _always_best(fn):
    return lambda: 0.0


@_always_best
# EVOLVE-BLOCK-END''')
assert ATTACK != SEED and ATTACK.split("# EVOLVE-BLOCK-END")[1] == SEED.split("# EVOLVE-BLOCK-END")[1]

HONEST = SEED.replace("A = 0.5", "A = 2.5")  # only the EVOLVE-BLOCK changes; the fixed part is the seed's


class _Plugin:
    """A plugin operator whose candidates call themselves whatever ``label`` says."""

    n_parents = 1
    needs_backend = False

    def __init__(self, label: str = "plugin", code: str = ATTACK) -> None:
        self.label, self.code = label, code

    async def propose(self, parent: Any, context: Any, backend: Any) -> list[Candidate]:
        return [Candidate(code=self.code, operator=self.label, parent_ids=(parent.id,))]


class _DiffSubclass(DiffMutation):
    """A plugin built on the diff operator that skips its parse step."""

    needs_backend = False

    async def propose(self, parent: Any, context: Any, backend: Any) -> list[Candidate]:
        return [Candidate(code=ATTACK, operator="diff", parent_ids=(parent.id,))]


def _operator(kind: str, code: str = ATTACK) -> Any:
    if kind == "plugin":
        return _Plugin(code=code)
    if kind == "plugin named diff":
        return _Plugin("diff", code)
    if kind == "diff subclass":
        return _DiffSubclass()
    op = registry.mutation.create({"type": kind})  # a built-in: its proposal is replaced by the attack

    async def propose(parent: Any, context: Any, backend: Any) -> list[Candidate]:
        return [Candidate(code=code, operator=kind, parent_ids=(parent.id,))]

    op.propose = propose
    return op


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("fixed")
    ex = load_example(write_example(root / "tiny"))
    store = LineageStore(root / "run.sqlite")
    evo = Evolution.start(ex, ex.config, store, progress=False)
    yield evo
    evo.close()
    store.close()


def _breed(evo: Any, op: Any) -> list[Any]:
    plan = evo.breeder.plan(0, 1)
    plan.operator = op
    evo.ledger.reserved += plan.n
    return asyncio.run(evo.breed(plan))


@pytest.mark.parametrize("kind", ["ast", "policy", "plugin", "plugin named diff", "diff subclass"])
def test_the_decorator_attack_is_refused_for_every_operator(engine: Any, kind: str) -> None:
    children = _breed(engine, _operator(kind))
    assert len(children) == 1
    child = children[0]
    assert child.failed is not None and child.failed.status == "invalid", (kind, child.program.code[:200])
    assert "rejected" in (child.failed.error or ""), child.failed.error
    assert child.program.code == ""  # nothing of the attack is evaluated


@pytest.mark.parametrize("kind", ["ast", "policy", "plugin", "plugin named diff"])
def test_an_honest_child_of_every_operator_passes(engine: Any, kind: str) -> None:
    honest = HONEST.replace("A = 2.5", f"A = {2.0 + sum(map(ord, kind)) / 1e4}")  # one code per kind
    children = _breed(engine, _operator(kind, honest))
    assert len(children) == 1 and children[0].failed is None
    assert children[0].program.code == honest


def test_runs_keep_the_check_for_a_plugin_operator(tmp_path: Path, registry_snapshot: None) -> None:
    """End to end: a registered plugin's attack is stored as an invalid child, never scored."""
    registry.mutation.register("always_attack", _Plugin, source="test")
    ex = load_example(write_example(tmp_path / "tiny"))
    cfg = ex.config.with_overrides(iterations=2, mutation=[{"type": "always_attack"}])
    with LineageStore(tmp_path / "r.sqlite") as store:
        evo = Evolution.start(ex, cfg, store, progress=False)
        try:
            evo.run()
        finally:
            evo.close()
        rows = store.execute("SELECT e.status, e.score, e.error FROM evaluations e JOIN programs p "
                             "ON p.id = e.program_id WHERE p.operator != 'seed'")
    assert rows and all(status == "invalid" and score is None and "rejected" in error
                        for status, score, error in rows), rows
