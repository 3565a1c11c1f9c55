"""MAP-Elites specifics: binning, replacement, running ranges, CVT, evaluator features."""

from __future__ import annotations

import numpy as np
import pytest

from qdevolve.archive.map_elites import MapElitesArchive, cvt_centroids
from qdevolve.errors import ConfigError
from qdevolve.types import EvalResult, Program


def _p(i: int, **kw) -> Program:
    return Program(code=f"x = {i}\n", run_id="r", **kw)


def _r(score: float, **feats: float) -> EvalResult:
    return EvalResult(status="ok", score=score, features=feats)


def test_fixed_grid_binning_and_elitism() -> None:
    arc = MapElitesArchive(feature_dimensions=["a", "b"], bins=[4, 2], ranges={"a": [0, 1], "b": [0, 10]})
    p1, p2, p3, p4 = (_p(i) for i in range(4))
    ev = arc.add(p1, _r(1.0, a=0.30, b=9.0))
    assert [(e.kind, e.cell) for e in ev] == [("added", "1,1")]
    assert arc.add(p2, _r(0.5, a=0.26, b=6.0)) == []  # same cell, worse
    assert arc.add(p3, _r(1.0, a=0.49, b=5.5)) == []  # same cell, equal: the incumbent stays
    ev = arc.add(p4, _r(2.0, a=0.25, b=5.0))
    assert [(e.kind, e.replaced_id) for e in ev] == [("improved", p1.id)]
    assert arc.get(p1.id) is None and arc.get(p4.id).cell == "1,1"
    # out-of-range values clip to the edge cells; the top edge belongs to the last bin
    p5, p6 = _p(5), _p(6)
    assert arc.add(p5, _r(0.1, a=-3.0, b=100.0))[0].cell == "0,1"
    assert arc.add(p6, _r(0.1, a=1.0, b=0.0))[0].cell == "3,0"
    s = arc.stats()
    assert s["cells"] == 8 and s["coverage"] == pytest.approx(3 / 8)
    assert s["qd_score"] == pytest.approx(2.2)


def test_qd_offset_is_subtracted_per_elite() -> None:
    arc = MapElitesArchive(feature_dimensions=["a"], bins=2, ranges=[[0, 1]], qd_offset=-1.0)
    arc.add(_p(0), _r(0.5, a=0.1))
    arc.add(_p(1), _r(0.25, a=0.9))
    assert arc.stats()["qd_score"] == pytest.approx(0.5 + 1 + 0.25 + 1)


def test_running_ranges_rebin_and_evict_deterministically() -> None:
    arc = MapElitesArchive(feature_dimensions=["a"], bins=2)
    a, b, c = _p(0), _p(1), _p(2)
    arc.add(a, _r(1.0, a=0.0))
    assert arc.get(a.id).cell == "1"  # a point range: the middle bin
    ev = arc.add(b, _r(2.0, a=1.0))
    assert arc.ranges.state() == {"a": [0.0, 1.0]}
    assert {e.program_id: e.cell for e in arc.elites()} == {a.id: "0", b.id: "1"}
    assert [e.kind for e in ev] == ["added"]
    # widening to [0, 10] puts both old elites into bin 0: the better one (b) stays
    ev = arc.add(c, _r(0.1, a=10.0))
    kinds = [(e.kind, e.program_id) for e in ev]
    assert ("removed", a.id) in kinds and ("added", c.id) in kinds
    assert {e.program_id for e in arc.elites()} == {b.id, c.id}
    assert arc.get(b.id).cell == "0" and arc.get(c.id).cell == "1"


def test_builtin_and_evaluator_features() -> None:
    arc = MapElitesArchive(feature_dimensions=["code_length", "ast_complexity", "diversity", "score", "depth"], bins=3)
    p = Program(code="def f(x):\n    return x + 1\n", run_id="r")
    arc.add(p, EvalResult(score=0.7, features={"depth": 4.0, "code_length": 99.0}))
    f = arc.get(p.id).features
    assert f["code_length"] == 99.0  # the evaluator's value wins over the built-in
    assert f["depth"] == 4.0 and f["score"] == 0.7 and f["diversity"] == 0.0
    assert f["ast_complexity"] > 5
    q = Program(code="y = [i * i for i in range(10)]\n", run_id="r")
    arc.add(q, EvalResult(score=0.1, features={"depth": 1.0}))
    assert 0.5 < arc.get(q.id).features["diversity"] <= 1.0
    with pytest.raises(ConfigError, match="'depth'"):
        arc.add(Program(code="z = 1\n", run_id="r"), EvalResult(score=0.1))


@pytest.mark.parametrize("bad", [{"bins": 0}, {"bins": [2]}, {"ranges": {"nope": [0, 1]}},
                                 {"ranges": [[1, 0], None]}, {"cvt_cells": 0}, {"feature_dimensions": []}])
def test_bad_options_raise_config_errors(bad: dict) -> None:
    kw = {"feature_dimensions": ["a", "b"], **bad}
    with pytest.raises(ConfigError):
        MapElitesArchive(**kw)


def test_cvt_cells_are_nearest_centroids() -> None:
    cent = cvt_centroids(8, 2, samples=1000, seed=3)
    assert cent.shape == (8, 2) and np.array_equal(cent, cvt_centroids(8, 2, samples=1000, seed=3))
    arc = MapElitesArchive(feature_dimensions=["a", "b"], ranges=[[0, 1], [0, 1]], cvt_cells=8, cvt_samples=1000, cvt_seed=3)
    rng = np.random.default_rng(0)
    for i in range(60):
        x = rng.random(2)
        ev = arc.add(_p(i), _r(float(rng.random()), a=float(x[0]), b=float(x[1])))
        want = int(((cent - x) ** 2).sum(1).argmin())
        if ev:
            assert ev[-1].cell == f"c{want}"
    assert arc.stats()["cells"] == 8 and len(arc) <= 8
    assert arc.coverage() == len(arc) / 8
