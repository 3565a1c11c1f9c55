"""Clade statistics of the ``dgm`` archive: the rule, the ancestor walk, state round trips."""

from __future__ import annotations

import numpy as np
import pytest

from qdevolve import registry
from qdevolve.archive.dgm import DGMArchive, evaluation_outcome
from qdevolve.archive.snapshot import decode, encode, restore, snapshot
from qdevolve.errors import ConfigError
from qdevolve.types import EvalResult, Program


def _child(name: str, *parents: Program) -> Program:
    return Program(code=f"x = '{name}'\n", run_id="r", id=name, parent_ids=tuple(p.id for p in parents),
                   generation=1 + max((p.generation for p in parents), default=-1))


def _clade(arc: DGMArchive, pid: str) -> tuple[float, int]:
    e = arc.get(pid)
    assert e is not None
    return e.clade_successes, e.clade_trials  # type: ignore[return-value]


def test_outcome_rule() -> None:
    assert evaluation_outcome(EvalResult(score=0.2, tests=[1, 0, 0.5]), None) == (1.5, 3)
    assert evaluation_outcome(EvalResult(score=0.2, tests=[2.0, -1.0, float("nan")]), 0.9) == (1.0, 3)
    assert evaluation_outcome(EvalResult(score=0.6), 0.5) == (1.0, 1)
    assert evaluation_outcome(EvalResult(score=0.5), 0.5) == (0.0, 1)  # not strictly better
    assert evaluation_outcome(EvalResult(score=0.5), None) == (0.0, 0)  # a seed: no trial
    assert evaluation_outcome(EvalResult(status="error", tests=[1, 1]), 0.1) == (0.0, 1)


def test_clades_sum_over_descendants_up_the_chain() -> None:
    arc = DGMArchive(feature_dimensions=["code_length"])
    s = _child("s")
    a, c = _child("a", s), _child("c", s)
    b, d = _child("b", a), _child("d", a)
    x = _child("x", d, c)  # crossover: s is reached twice, counted once
    arc.add(s, EvalResult(score=0.5, tests=[1, 0]))
    assert _clade(arc, "s") == (1.0, 2)
    arc.add(a, EvalResult(score=0.4, tests=[1, 1, 0]))
    assert _clade(arc, "a") == (2.0, 3) and _clade(arc, "s") == (3.0, 5)
    arc.add(b, EvalResult(status="error", error="boom"))  # not admitted, still a failure of its clades
    assert arc.get("b") is None and _clade(arc, "a") == (2.0, 4) and _clade(arc, "s") == (3.0, 6)
    arc.add(c, EvalResult(score=0.9))  # beats s (0.5): one success
    arc.add(d, EvalResult(score=0.3))  # below a (0.4): one failure
    assert _clade(arc, "c") == (1.0, 1) and _clade(arc, "d") == (0.0, 1)
    assert _clade(arc, "a") == (2.0, 5) and _clade(arc, "s") == (4.0, 8)
    arc.add(x, EvalResult(score=0.95))  # beats its best parent c (0.9)
    assert _clade(arc, "x") == (1.0, 1) and _clade(arc, "c") == (2.0, 2) and _clade(arc, "d") == (1.0, 2)
    assert _clade(arc, "a") == (3.0, 6) and _clade(arc, "s") == (5.0, 9)
    assert arc.get("x").parent_id == "d" and arc.get("s").parent_id is None  # type: ignore[union-attr]
    arc.add(x, EvalResult(score=0.95))  # the same id again: counted once
    assert _clade(arc, "s") == (5.0, 9)


def _stream(n: int, seed: int) -> list[tuple[Program, EvalResult]]:
    """A random DAG (some crossovers) with test vectors, plain scores and failures."""
    rng = np.random.default_rng(seed)
    out = [(Program(code="x = 0\n", run_id="r", id="p0"), EvalResult(score=0.5, tests=[1.0, 0.0]))]
    for i in range(1, n):
        ok = [p for p, r in out if r.status == "ok"]
        parents = [ok[int(rng.integers(len(ok)))]]
        if rng.random() < 0.15:
            parents.append(ok[int(rng.integers(len(ok)))])
        prog = _child(f"p{i}", *{q.id: q for q in parents}.values())
        prog.code = f"x = {i}\n" + "y = 1\n" * int(rng.integers(5))
        roll = rng.random()
        if roll < 0.15:
            res = EvalResult(status="timeout", error="slow")
        elif roll < 0.6:
            res = EvalResult(score=float(rng.random()), tests=[float(v) for v in rng.random(int(rng.integers(1, 5)))])
        else:
            res = EvalResult(score=float(rng.random()))
        out.append((prog, res))
    return out


@pytest.mark.parametrize("opts", [{}, {"keep": "better", "noise": 0.2}, {"max_size": 10}])
def test_clades_equal_a_brute_force_count(opts: dict) -> None:
    stream = _stream(150, seed=3)
    arc = DGMArchive(feature_dimensions=["code_length"], **opts)
    for p, r in stream:
        arc.add(p, r)
    parents = {p.id: p.parent_ids for p, _ in stream}
    score = {p.id: r.score for p, r in stream if r.status == "ok"}
    own = {p.id: evaluation_outcome(r, max((score[q] for q in p.parent_ids), default=None)) for p, r in stream}

    def ancestors_or_self(pid: str) -> set[str]:
        seen, todo = {pid}, [pid]
        while todo:
            for q in parents[todo.pop()]:
                if q not in seen:
                    seen.add(q)
                    todo.append(q)
        return seen

    expected = {pid: [0.0, 0] for pid in parents}
    for pid, (s, t) in own.items():
        for q in ancestors_or_self(pid):
            expected[q][0] += s
            expected[q][1] += t
    assert len(arc) > 5
    for e in arc.elites():
        assert e.clade_successes == pytest.approx(expected[e.program_id][0])
        assert e.clade_trials == expected[e.program_id][1]
        assert e.parent_id == (parents[e.program_id][0] if parents[e.program_id] else None)


def test_an_add_walks_only_the_ancestor_chain() -> None:
    arc = DGMArchive(feature_dimensions=["code_length"])
    seed = _child("s")
    arc.add(seed, EvalResult(score=0.0))
    chain = seed
    for i in range(30):  # a wide star under the seed and one long chain
        arc.add(_child(f"w{i}", seed), EvalResult(score=0.1))
    for i in range(30):
        chain = _child(f"c{i}", chain)
        arc.add(chain, EvalResult(score=0.2))
    touched = arc.clades.record(_child("leaf", chain), EvalResult(score=0.3))
    assert sorted(touched) == sorted(["leaf", "s", *(f"c{i}" for i in range(30))])


@pytest.mark.parametrize("spec", [{"type": "dgm"}, {"type": "dgm", "max_size": 12},
                                  {"type": "islands", "n_islands": 2, "migration_interval": 5,
                                   "inner": {"type": "dgm"}}], ids=["dgm", "dgm_capped", "islands_dgm"])
def test_a_restored_archive_and_a_replayed_one_hold_the_same_clades(spec: dict) -> None:
    stream = _stream(80, seed=11)
    for prog, _ in stream:
        prog.island = int(prog.id[1:]) % spec.get("n_islands", 1)
    full = registry.archive.create(spec)
    for p, r in stream:
        full.add(p, r)
    for k in (1, 20, 57):
        head = registry.archive.create(spec)
        for p, r in stream[:k]:
            head.add(p, r)
        back = restore(spec, decode(encode(snapshot(head))))
        for p, r in stream[k:]:
            back.add(p, r)
        assert encode(snapshot(back)) == encode(snapshot(full))
        fields = lambda a: [(e.program_id, e.island, e.parent_id, e.clade_successes, e.clade_trials)  # noqa: E731
                            for e in a.elites()]
        assert fields(back) == fields(full)
        assert all(e.clade_trials is not None for e in full.elites())


def test_a_state_without_clades_is_refused() -> None:
    arc = DGMArchive()
    arc.add(_child("s"), EvalResult(score=1.0))
    state = arc.state()
    del state["clades"]
    with pytest.raises(ValueError, match="clade statistics"):
        DGMArchive().load_state(state)


def test_an_unplaceable_child_counts_once() -> None:
    arc = DGMArchive(feature_dimensions=["w"])
    seed = _child("s")
    arc.add(seed, EvalResult(score=1.0, features={"w": 0.5}))
    child = _child("k", seed)
    with pytest.raises(ConfigError):
        arc.add(child, EvalResult(score=2.0, features={}))
    assert _clade(arc, "s") == (0.0, 0)
    arc.add(child, EvalResult(status="invalid", error="archive: no feature w"))
    assert _clade(arc, "s") == (0.0, 1)


def test_other_archives_carry_no_clades_and_hgm_says_so() -> None:
    arc = registry.archive.create({"type": "map_elites", "bins": 4})
    arc.add(_child("s"), EvalResult(score=1.0))
    assert arc.elites()[0].clade_trials is None
    with pytest.raises(ConfigError, match="dgm archive"):
        arc.sample(np.random.default_rng(0), registry.selection.create({"type": "hgm"}))
    dgm = DGMArchive()
    dgm.add(_child("s"), EvalResult(score=1.0))
    assert dgm.sample(np.random.default_rng(0), registry.selection.create({"type": "hgm"}))[0].program_id == "s"
