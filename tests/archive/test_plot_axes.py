"""``archive plot``: the grid's axes are in feature units (the configured ranges), not bin indices."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from qdevolve import registry
from qdevolve.cli.archive import archive_figure
from qdevolve.types import EvalResult, Program

pytest.importorskip("matplotlib")


def _rep(archive: object) -> SimpleNamespace:
    return SimpleNamespace(archive=archive, history=[{"evaluations": 1, "best_score": 1.0, "qd_score": 1.0}])


def _add(arc: object, fill: float, bins_used: float, score: float) -> None:
    arc.add(Program(code=f"x = {fill}, {bins_used}\n"),
            EvalResult(score=score, features={"fill_cv": fill, "bins_used": bins_used}))


def test_grid_axes_are_in_feature_units() -> None:
    arc = registry.archive.create({"type": "map_elites", "feature_dimensions": ["fill_cv", "bins_used"],
                                   "bins": [4, 5], "ranges": [[0.0, 0.5], [10, 60]]})
    _add(arc, 0.1, 20, 0.8)
    _add(arc, 0.45, 55, 0.9)
    fig = archive_figure({"id": "r" * 12, "name": "bp"}, _rep(arc))
    ax = fig.axes[0]
    image = ax.get_images()[0]
    assert tuple(image.get_extent()) == (0.0, 0.5, 10.0, 60.0)
    assert ax.get_xlim() == (0.0, 0.5) and ax.get_ylim() == (10.0, 60.0)
    assert ax.get_xlabel() == "fill_cv" and ax.get_ylabel() == "bins_used"
    fig.canvas.draw()
    xticks = [t for t in ax.get_xticks() if 0.0 <= t <= 0.5]
    assert max(xticks) > 0.3 and all(abs(t * 100 - round(t * 100)) < 1e-9 for t in xticks)  # 0.0 .. 0.5, not 0..3
    yticks = [t for t in ax.get_yticks() if 10 <= t <= 60]
    assert max(yticks) >= 50
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_running_ranges_give_the_observed_extent() -> None:
    arc = registry.archive.create({"type": "map_elites", "feature_dimensions": ["fill_cv", "bins_used"], "bins": 3})
    _add(arc, 0.2, 12, 0.5)
    _add(arc, 0.3, 30, 0.7)
    fig = archive_figure({"id": "r" * 12, "name": "bp"}, _rep(arc))
    assert tuple(fig.axes[0].get_images()[0].get_extent()) == (0.2, 0.3, 12.0, 30.0)
    import matplotlib.pyplot as plt

    plt.close(fig)


def _colour_bar(fig: object) -> tuple[str, list[str]]:
    """The colour bar's label and tick labels, as drawn."""
    fig.canvas.draw()
    bar = fig.axes[0].get_images()[0].colorbar.ax  # the map's colour bar
    return bar.get_ylabel(), [t.get_text() for t in bar.get_yticklabels() if t.get_text()]


def test_the_colour_bar_reads_the_scores_lowest_and_highest() -> None:
    arc = registry.archive.create({"type": "map_elites", "feature_dimensions": ["fill_cv", "bins_used"],
                                   "bins": [4, 5], "ranges": [[0.0, 0.5], [10, 60]]})
    _add(arc, 0.1, 20, 1.60012)
    _add(arc, 0.45, 55, 1.60047)  # close scores: no offset such as "+1.6" with ticks reading 0 ... 0
    fig = archive_figure({"id": "r" * 12, "name": "bp"}, _rep(arc))
    label, ticks = _colour_bar(fig)
    assert label == "best score (1.60012 to 1.60047)", label  # digits enough to tell the two apart

    assert len(set(ticks)) == len(ticks) >= 2 and all(float(t.replace("−", "-")) > 1.5 for t in ticks), ticks
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_a_single_value_is_labelled_as_one_value_not_a_range() -> None:
    arc = registry.archive.create({"type": "map_elites", "feature_dimensions": ["fill_cv", "bins_used"],
                                   "bins": [4, 5], "ranges": [[0.0, 0.5], [10, 60]]})
    _add(arc, 0.1, 20, 0.0)
    fig = archive_figure({"id": "r" * 12, "name": "bp"}, _rep(arc))
    label, ticks = _colour_bar(fig)
    assert label == "best score (every value is 0)" and ticks == ["0"], (label, ticks)
    import matplotlib.pyplot as plt

    plt.close(fig)
