"""benchmarks/reports/compat.py renders the controller CPU per evaluation of each path from the raw
runs (median over repeats with its interval, nearest-rank p90, rate, per-repeat ratios to the
native config) and reads the ratio's interval by rule."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
_spec = importlib.util.spec_from_file_location("compat_renderer", ROOT / "benchmarks" / "reports" / "compat.py")
renderer = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(renderer)


def synthetic(native_ms: list[float], compat_ms: list[float], wall_s: float = 2.0) -> dict[str, Any]:
    runs = []
    for i, (a, b) in enumerate(zip(native_ms, compat_ms, strict=True)):
        runs.append({"repeat": i, "seed": 1 + i, "config": "native", "cpu_s": a / 100, "evaluations": 10,
                     "wall_s": wall_s})
        runs.append({"repeat": i, "seed": 1 + i, "config": "compat", "cpu_s": b / 100, "evaluations": 10,
                     "wall_s": wall_s / 2})
    return {"meta": {"commit": "abc", "seeds": [1, 2, 3, 4]},
            "settings": {"iterations": 9, "repeats": len(runs) // 2, "workers": 2, "sandbox": "local",
                         "mutator": "ast (offline)", "reference": "native", "configs": {"native": {}, "compat": {}}},
            "runs": runs}


def _line(table: str, start: str) -> list[str]:
    (line,) = [ln for ln in table.splitlines() if ln.startswith(f"| {start}")]
    return [c.strip() for c in line.strip("|").split("|")]


def test_the_table_follows_the_numbers() -> None:
    out = renderer.render(synthetic([10.0, 11.0, 12.0, 10.0], [20.0, 22.0, 24.0, 20.0]))
    native = _line(out["table"], "native config")
    assert native[1] == "4" and native[2].startswith("10.50 (") and native[3] == "12.00"  # ms = cpu_s * 1000 / 10
    assert native[4] == "5.0" and native[5] == "reference"  # 10 evaluations in 2 s
    compat = _line(out["table"], "compatibility paths")
    assert compat[2].startswith("21.00 (") and compat[3] == "24.00" and compat[4] == "10.0"
    assert compat[5] == "2.00x (2.00x to 2.00x)" and compat[6] == "2.00x"  # every repeat's ratio is 2
    assert '"costs more" (ratio > 1) holds' in out["summary"] and "reading: costs more" in out["summary"]
    assert "10 evaluations" in out["setup"] and "4 repeats" in out["setup"]


def test_a_cheaper_path_and_no_difference_are_read_by_rule() -> None:
    cheaper = renderer.render(synthetic([10.0, 12.0, 14.0], [5.0, 6.0, 7.0]))
    assert _line(cheaper["table"], "compatibility paths")[5] == "0.50x (0.50x to 0.50x)"
    assert '"costs less" (ratio < 1) holds' in cheaper["summary"] and "reading: costs less" in cheaper["summary"]
    mixed = renderer.render(synthetic([10.0, 10.0, 10.0, 10.0], [9.0, 11.0, 9.5, 10.5]))
    iv = renderer.bootstrap_interval([0.9, 1.1, 0.95, 1.05], renderer.median)
    assert _line(mixed["table"], "compatibility paths")[5] == f"{iv.estimate:.2f}x ({iv.lo:.2f}x to {iv.hi:.2f}x)"
    assert "reading: no difference shown" in mixed["summary"]
