"""The held-out task of the sample-efficiency benchmark: Heilbronn's triangle problem for 8
points, scored by the smallest triangle, validated with zero tolerance."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "heilbronn_triangle"
_spec = importlib.util.spec_from_file_location("heilbronn_evaluator", EXAMPLE / "evaluator.py")
ev = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ev)


def _program(tmp_path: Path, points: list[tuple[float, float]]) -> str:
    path = tmp_path / "candidate.py"
    path.write_text(f"nan = float(\"nan\")\n\n\ndef place_points():\n    return {points!r}\n")
    return str(path)


def test_seed_scores_its_unique_smallest_triangle() -> None:
    result = ev.evaluate(str(EXAMPLE / "initial_program.py"))
    assert result["validity"] == 1.0 and result["combined_score"] == pytest.approx(0.0217185, abs=1e-9)
    assert result["combined_score"] == result["min_area"] < ev.BEST_KNOWN == pytest.approx(0.0723764, abs=1e-7)


def test_area_is_the_shoelace_formula_and_collinear_points_score_zero(tmp_path: Path) -> None:
    assert ev.triangle_area((0, 0), (1, 0), (0, 1)) == 0.5
    assert ev.triangle_area((0.1, 0.2), (0.4, 0.2), (0.3, 0.6)) == pytest.approx(0.5 * 0.3 * 0.4)
    points = [(0.0, 0.0), (0.5, 0.5), (1.0, 1.0), (1.0, 0.0), (0.0, 1.0), (0.2, 0.7), (0.8, 0.35), (0.4, 0.05)]
    result = ev.evaluate(_program(tmp_path, points))
    assert result["validity"] == 1.0 and result["combined_score"] == 0.0  # the diagonal holds three points


@pytest.mark.parametrize("points, reason", [
    ([(0.1 * i, 0.5) for i in range(7)], "expected 8 points, got 7"),
    ([(0.1 * i + 0.05, 0.1 * (i % 3)) for i in range(7)] + [(1.0 + 1e-12, 0.5)], "point 7 at (1.000000, 0.500000) leaves"),
    ([(0.1 * i + 0.05, 0.1 * (i % 3)) for i in range(7)] + [(float("nan"), 0.5)], "point 7 is not two finite numbers"),
])
def test_invalid_placements_score_zero_with_the_reason(tmp_path: Path, points: list, reason: str) -> None:
    result = ev.evaluate(_program(tmp_path, points))
    assert result["combined_score"] == 0.0 and result["validity"] == 0.0
    assert result["artifacts"]["validation"].startswith(reason)
