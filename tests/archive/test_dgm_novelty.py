"""DGM (keep everything) and novelty (k-NN threshold) archives."""

from __future__ import annotations

import numpy as np
import pytest

from qdevolve.archive.dgm import DGMArchive
from qdevolve.archive.novelty import NoveltyArchive, knn_novelty
from qdevolve.types import EvalResult, Program


def _p(i: int) -> Program:
    return Program(code=f"x = {i}\n", run_id="r")


def test_dgm_keeps_every_valid_program() -> None:
    arc = DGMArchive(feature_dimensions=["a"])
    for i in range(20):
        ev = arc.add(_p(i), EvalResult(score=float(i % 3), features={"a": float(i)}))
        assert [e.kind for e in ev] == ["added"]
    assert len(arc) == 20 and arc.stats()["qd_score"] == pytest.approx(sum(i % 3 for i in range(20)))
    assert arc.stats()["coverage"] == pytest.approx(10 / 10)  # 20 values spread over 10 bins


def test_dgm_keep_better_and_max_size() -> None:
    arc = DGMArchive(keep="better", noise=0.1, max_size=3, feature_dimensions=["a"])
    arc.add(_p(0), EvalResult(score=0.5, features={"a": 0.0}))
    assert arc.add(_p(1), EvalResult(score=0.35, features={"a": 1.0})) == []
    assert arc.add(_p(2), EvalResult(score=0.45, features={"a": 1.0}))
    arc.add(_p(3), EvalResult(score=0.9, features={"a": 2.0}))
    ev = arc.add(_p(4), EvalResult(score=0.6, features={"a": 3.0}))
    assert [e.kind for e in ev] == ["added", "removed"] and ev[1].score == 0.45
    assert sorted(e.score for e in arc.elites()) == [0.5, 0.6, 0.9]


def test_novelty_threshold_and_replace_nearest() -> None:
    arc = NoveltyArchive(feature_dimensions=["a", "b"], k=1, threshold=0.2, ranges=[[0, 1], [0, 1]])
    p0, p1, p2, p3 = (_p(i) for i in range(4))
    assert arc.add(p0, EvalResult(score=0.1, features={"a": 0.0, "b": 0.0}))[0].kind == "added"
    assert arc.add(p1, EvalResult(score=0.1, features={"a": 1.0, "b": 1.0}))[0].kind == "added"
    # too close to p0 and not better: rejected
    assert arc.add(p2, EvalResult(score=0.05, features={"a": 0.05, "b": 0.0})) == []
    # too close to p0 but better: replaces its nearest neighbour
    ev = arc.add(p3, EvalResult(score=0.5, features={"a": 0.05, "b": 0.0}))
    assert [(e.kind, e.replaced_id) for e in ev] == [("improved", p0.id)]
    novs = {e.program_id: e.novelty for e in arc.elites()}
    assert novs[p3.id] == pytest.approx(np.hypot(0.95, 1.0))


def test_knn_novelty_formula() -> None:
    pts = np.array([[0.0, 0.0], [3.0, 4.0], [6.0, 8.0]])
    assert knn_novelty(np.array([0.0, 0.0]), pts, 2) == pytest.approx((0 + 5) / 2)
    assert knn_novelty(np.array([0.0, 0.0]), pts[:0], 2) == float("inf")


@pytest.mark.parametrize("opts", [{}, {"max_size": 25}, {"ranges": [[0, 1], [0, 1]], "threshold": 0.02}])
def test_incremental_novelty_equals_brute_force(opts: dict) -> None:
    arc = NoveltyArchive(feature_dimensions=["a", "b"], k=4, **{"threshold": 0.05, **opts})
    rng = np.random.default_rng(0)
    kinds = set()
    for i in range(300):
        f = {"a": float(rng.normal()), "b": float(rng.normal())}
        for ev in arc.add(_p(i), EvalResult(score=float(rng.random()), features=f)):
            kinds.add(ev.kind)
        if i % 37 == 0:
            elites = arc.elites()
            pts = np.array([arc.ranges.normalize(e.features) for e in elites])
            for j, e in enumerate(elites):
                want = knn_novelty(pts[j], np.delete(pts, j, axis=0), 4) if len(elites) > 1 else None
                assert e.novelty == pytest.approx(want, abs=1e-12)
    if "max_size" not in opts:
        assert {"added", "improved"} <= kinds
    else:
        assert "removed" in kinds and len(arc) == 25
