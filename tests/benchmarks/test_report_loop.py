"""benchmarks/reports/loop.py renders loop.json by rule: the controller-CPU goal, the 2-over-1
worker speed-up (paired by repeat) and "best > seed score" (over seeds) each get the verdict
their numbers give, so changing the numbers changes the verdict."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("bench_report_loop", ROOT / "benchmarks" / "reports" / "loop.py")
assert spec is not None and spec.loader is not None
loop = importlib.util.module_from_spec(spec)
spec.loader.exec_module(loop)

CONTROLLER_GOAL = [{"metric": "cpu_ms_per_eval", "op": "<=", "value": 5, "unit": "ms CPU"}]
SPEEDUP_GOAL = [{"metric": "speedup_vs_1_worker", "op": ">", "value": 1, "unit": "x"}]
CP_GOAL = [{"metric": "best_minus_seed_score", "op": ">", "value": 0, "unit": ""}]


def raw(cpu_ms: list[float], rates_1: list[float], rates_2: list[float], gains: list[float]) -> dict[str, Any]:
    n = 1000
    controller = [{"repeat": k, "evaluations": n, "cpu_s": ms * n / 1000, "wall_s": ms * n / 1000 * 1.1,
                   "loadavg": 1.0, "goals": CONTROLLER_GOAL} for k, ms in enumerate(cpu_ms)]
    throughput = []
    for k, (r1, r2) in enumerate(zip(rates_1, rates_2, strict=True)):
        throughput += [{"repeat": k, "workers": 1, "sandbox": "bwrap", "evaluations": 200, "wall_s": 200 / r1,
                        "cpu_s": 2.0, "loadavg": 1.0, "goals": []},
                       {"repeat": k, "workers": 2, "sandbox": "bwrap", "evaluations": 200, "wall_s": 200 / r2,
                        "cpu_s": 2.0, "loadavg": 1.2, "goals": SPEEDUP_GOAL}]
    cp = [{"archive": "dgm", "seed": s, "evaluations": 500, "best": 1.6586 + g, "seed_score": 1.6586,
           "qd_score": 300.0, "coverage": 0.5, "wall_s": 60.0, "cpu_s": 50.0, "loadavg": 1.0, "goals": CP_GOAL}
          for s, g in enumerate(gains)]
    return {"meta": {}, "settings": {"circle_packing_evaluations": 500}, "controller": controller,
            "throughput": throughput, "circle_packing": cp}


def cells(text: str, label: str) -> list[str]:
    line = next(ln for ln in text.splitlines() if ln.startswith(f"| {label}"))
    return [c.strip() for c in line.strip("|").split("|")]


@pytest.mark.parametrize(("cpu_ms", "expected"), [
    ([2.5, 2.6, 2.7], "holds"),
    ([2.5, 4.0, 6.0], "holds in the mean"),
    ([4.0, 6.0, 7.0], "does not hold"),
])
def test_controller_verdict_follows_the_repeats(cpu_ms: list[float], expected: str) -> None:
    row = cells(loop.render(raw(cpu_ms, [18] * 3, [30] * 3, [0.1] * 3))["table"], "controller CPU")
    assert row[3] == "<= 5 ms CPU"
    assert row[4] == expected
    assert row[1].startswith(f"{sorted(cpu_ms)[1]:.2f} ms ({min(cpu_ms):.2f} to {max(cpu_ms):.2f}, 3 repeats)")


@pytest.mark.parametrize(("rates_2", "expected"), [
    ([30.0, 28.0, 33.0], "holds"),
    ([30.0, 16.0, 33.0], "holds in the mean"),  # repeat 1: 2 workers slower than 1
    ([17.0, 16.0, 33.0], "does not hold"),
])
def test_speedup_is_paired_by_repeat(rates_2: list[float], expected: str) -> None:
    out = loop.render(raw([2.5] * 3, [18.0, 18.0, 18.0], rates_2, [0.1] * 3))["table"]
    row = cells(out, "speed-up of 2 over 1 worker")
    assert row[3] == "> 1x" and row[4] == expected
    assert cells(out, "trivial evaluator through the bwrap sandbox, 2 workers")[1].startswith(
        f"{sorted(rates_2)[1]:.1f} evals/s")


@pytest.mark.parametrize(("gains", "expected"), [
    ([0.1, 0.2, 0.15], "holds"),
    ([0.1, -0.05, -0.04], "holds in the mean"),
    ([-0.1, 0.01, 0.02], "does not hold"),
])
def test_best_over_seed_score_is_judged_over_seeds(gains: list[float], expected: str) -> None:
    row = cells(loop.render(raw([2.5] * 3, [18] * 3, [30] * 3, gains))["circle_packing"], "dgm")
    assert row[-2] == "best > seed score"
    assert row[-1] == expected
    assert row[4] == "1.6586"
