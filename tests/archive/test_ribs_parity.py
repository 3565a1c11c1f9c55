"""The pyribs adapter gives the same elites as our own grid for the same inserts."""

from __future__ import annotations

import numpy as np
import pytest
from archive_streams import program_stream

pytest.importorskip("ribs")

from qdevolve.archive.map_elites import MapElitesArchive  # noqa: E402
from qdevolve.archive.ribs_adapter import RibsArchive  # noqa: E402
from qdevolve.types import EvalResult, Program  # noqa: E402


@pytest.mark.parametrize("bins", [3, [4, 7]])
def test_same_inserts_same_elites(bins) -> None:
    ranges = [[0, 1], [0, 1]]
    ours = MapElitesArchive(feature_dimensions=["width", "depth"], bins=bins, ranges=ranges)
    theirs = RibsArchive(feature_dimensions=["width", "depth"], bins=bins, ranges=ranges)
    for p, r in program_stream(250, seed=2, features=True):
        e1 = [(e.kind, e.cell, e.replaced_id) for e in ours.add(p, r)]
        e2 = [(e.kind, e.cell, e.replaced_id) for e in theirs.add(p, r)]
        assert e1 == e2
    key = sorted((e.cell, e.program_id, e.score) for e in ours.elites())
    assert key == sorted((e.cell, e.program_id, e.score) for e in theirs.elites())
    s1, s2 = ours.stats(), theirs.stats()
    assert s2["ribs"]["num_elites"] == s1["size"]
    assert s2["ribs"]["qd_score"] == pytest.approx(s1["qd_score"])
    assert s2["coverage"] == pytest.approx(s1["coverage"])


def test_bin_edges_match_pyribs() -> None:
    ours = MapElitesArchive(feature_dimensions=["a"], bins=10, ranges=[[-1, 2]])
    theirs = RibsArchive(feature_dimensions=["a"], bins=10, ranges=[[-1, 2]])
    for i, v in enumerate(np.linspace(-1.5, 2.5, 81)):
        p = Program(code=f"x = {i}\n", run_id="r")
        r = EvalResult(score=float(i), features={"a": float(v)})
        assert [e.cell for e in ours.add(p, r)] == [e.cell for e in theirs.add(p, r)]


def test_ranges_are_required() -> None:
    from qdevolve.errors import ConfigError

    with pytest.raises(ConfigError, match="missing"):
        RibsArchive(feature_dimensions=["a", "b"], ranges={"a": [0, 1]})
