"""benchmarks/reports/diversity_drift.py renders the mean-field drift table from the raw rows and
computes its reading (which arms move mass toward the favourite, sums of advantages, the chance
an answer appears in a group) from the numbers."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
_spec = importlib.util.spec_from_file_location("diversity_drift_renderer",
                                               ROOT / "benchmarks" / "reports" / "diversity_drift.py")
renderer = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(renderer)


def synthetic(ips_fav: float = -0.2, rare_sum: float = -1.2) -> dict[str, Any]:
    """Three correct answers, pass@1 0.75: grpo favours the favourite, ips as given, rare as given."""
    def row(arm: str, key: str, drift: list[float], total: float) -> dict[str, Any]:
        return {"pass1": 0.75, "arm": arm, "arm_key": key, "drift": drift, "sum_advantages": total}
    return {"meta": {"commit": "abc", "seeds": [0]},
            "settings": {"G": 8, "n_correct": 3, "zipf_exponent": 1.0, "groups": 100, "seed": 0, "levels": [0.75],
                         "shares": {"0.75": [0.75 * 6 / 11, 0.75 * 3 / 11, 0.75 * 2 / 11, 0.25]}},
            "rows": [row("grpo", "grpo", [1.0, 0.5, 0.2, -1.7], 0.0),
                     row("ips", "ips", [ips_fav, 0.6, 0.5, -0.9], 0.0),
                     row("rare", "rare", [0.8, 0.5, 0.3, -1.6], rare_sum)]}


def _cells(table: str, arm: str) -> list[str]:
    (line,) = [ln for ln in table.splitlines() if ln.startswith(f"| 0.75 | {arm} |")]
    return [c.strip() for c in line.strip("|").split("|")]


def test_the_table_and_figures_follow_the_rows() -> None:
    out = renderer.render(synthetic())
    assert _cells(out["table"], "grpo") == ["0.75", "grpo", "+1.000", "+0.500", "+0.200", "-1.700", "+0.800", "+0.00"]
    assert _cells(out["table"], "ips")[6] == "-0.700"  # favourite minus the rarest (third) correct answer
    assert out["fav_last-rare-0.75"] == "+0.50" and out["sum_a-rare-0.75"] == "-1.20"
    p_fav, p_last = 0.75 * 6 / 11, 0.75 * 2 / 11
    assert out["appear-fav-0.75"] == f"{1 - (1 - p_fav) ** 8:.2f}"
    assert out["appear-rarest-0.75"] == f"{1 - (1 - p_last) ** 8:.2f}"
    assert "3 correct answers" in out["setup"] and "100 groups" in out["setup"] and "G = 8" in out["setup"]


def test_the_reading_flips_with_the_signs() -> None:
    out = renderer.render(synthetic())
    assert "grpo (+0.800) and rare (+0.500) move mass toward the favourite" in out["reading"]
    assert "ips (-0.700) moves it toward the rarest correct answer" in out["reading"]
    assert "rare 0.62x" in out["reading"]  # 0.5 / 0.8 of GRPO's fav - last
    assert "Advantages that do not sum to zero: rare (-1.20); where the sum is negative (rare)" in out["reading"]
    flipped = renderer.render(synthetic(ips_fav=1.5, rare_sum=0.0))
    assert "grpo (+0.800), ips (+1.000) and rare (+0.500) move mass toward the favourite" in flipped["reading"]
    assert "toward the rarest" not in flipped["reading"]
    assert "Every arm's advantages sum to zero" in flipped["reading"]
    flat = renderer.render(synthetic(ips_fav=0.5))
    assert "ips (+0.000) moves neither way" in flat["reading"]
