"""QD-score stays finite however large the elites' scores (issue 10: 1e308 made it inf)."""

from __future__ import annotations

import sys

import numpy as np

from qdevolve.archive.base import qd_score
from qdevolve.archive.map_elites import MapElitesArchive
from qdevolve.types import EvalResult, Program


def test_qd_score_by_hand_and_saturation() -> None:
    assert qd_score([1.0, 2.5], offset=0.5) == 2.5
    assert qd_score([1e308, 1e308]) == sys.float_info.max
    assert qd_score([-1e308, -1e308]) == -sys.float_info.max
    assert qd_score([1e308, -1e308, 5.0]) == 5.0
    assert qd_score([1e308, 1e308, -1e308]) == 1e308  # exact, through the scaled sum
    assert qd_score([]) == 0.0


def test_map_elites_stats_with_huge_scores() -> None:
    arc = MapElitesArchive(feature_dimensions=["a"], ranges=[[0, 1]], bins=4)
    for i, score in enumerate([1e308, 1.5e308, 1.7e308]):
        arc.add(Program(code=f"x = {i}\n", run_id="r"), EvalResult(score=score, features={"a": i / 3}))
    st = arc.stats()
    assert st["size"] == 3 and st["qd_score"] == sys.float_info.max


def test_cvt_cells_use_the_shared_normalisation() -> None:
    arc = MapElitesArchive(feature_dimensions=["a", "b"], ranges=[[0, 10], [0, 10]], cvt_cells=16, cvt_seed=0)
    v = np.array([[0.0, 10.0], [5.0, 5.0], [20.0, -3.0]])
    x = arc.ranges.normalize_matrix(v)
    d2 = ((x[:, None, :] - arc.centroids[None, :, :]) ** 2).sum(-1)
    assert arc._cells_of(v) == [f"c{int(k)}" for k in d2.argmin(1)]


def test_islands_sum_stays_finite() -> None:
    from qdevolve.archive.islands import IslandsArchive

    arc = IslandsArchive(n_islands=2, migration_interval=1000,
                         inner={"type": "map_elites", "feature_dimensions": ["a"], "ranges": [[0, 1]], "bins": 2})
    for i in range(4):
        p = Program(code=f"x = {i}\n", run_id="r", island=i % 2)
        arc.add(p, EvalResult(score=1.7e308, features={"a": (i // 2) * 0.9}))
    assert arc.stats()["qd_score"] == sys.float_info.max
