"""benchmarks/reports/store.py renders store.json's rows by rule: the verdict of each goal follows
the repeats' numbers (holds / holds in the mean / does not hold), a goal stated for another size
is not judged, and the goal rule's ends are inclusive for <= and >= only."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _module(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"bench_report_{name.lstrip('_')}",
                                                  ROOT / "benchmarks" / "reports" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


store = _module("store")
goals = _module("_goals")

INSERT_GOAL = [{"metric": "programs_per_s", "op": ">=", "value": 20_000, "unit": "programs/s",
                "applies_to": {"programs": 100_000}}]
INSPECT_GOALS = [{"metric": "wall_s", "op": "<=", "value": 3, "unit": "s", "applies_to": {"programs": 200_000}},
                 {"metric": "peak_rss_mb", "op": "<=", "value": 300, "unit": "MB",
                  "applies_to": {"programs": 200_000}}]


def raw(rates: list[float], inspect_walls: list[float], rss: list[float], programs: int = 100_000) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    for k, rate in enumerate(rates):
        rows.append({"kind": "insert", "backend": "sqlite", "repeat": k, "programs": programs, "batch": 5000,
                     "wall_s": programs / rate, "cpu_s": programs / rate, "loadavg": 1.0, "goals": INSERT_GOAL})
        rows.append({"kind": "ancestry", "backend": "sqlite", "repeat": k, "depth": 5000,
                     "call_wall_s": [0.04, 0.045 + k / 1000, 0.05], "call_cpu_s": [0.04] * 3, "loadavg": 1.0,
                     "goals": [{"metric": "wall_ms", "op": "<", "value": 50, "unit": "ms",
                                "applies_to": {"depth": 5000}}]})
    for k, (wall, peak) in enumerate(zip(inspect_walls, rss, strict=True)):
        rows.append({"kind": "inspect", "backend": "sqlite", "repeat": k, "command": "archive stats",
                     "programs": 200_000, "wall_s": wall, "cpu_s": wall, "peak_rss_mb": peak, "lines": 16,
                     "replayed": 1805, "loadavg": 1.0, "goals": INSPECT_GOALS})
    return {"meta": {}, "settings": {"ancestry_calls": 3}, "rows": rows}


def cells(text: str, label: str) -> list[str]:
    line = next(ln for ln in text.splitlines() if ln.startswith(f"| {label}"))
    return [c.strip() for c in line.strip("|").split("|")]


@pytest.mark.parametrize(("rates", "expected"), [
    ([25_000, 24_000, 26_000], "holds"),
    ([25_000, 15_000, 24_000], "holds in the mean"),  # median meets the goal, the lower end does not
    ([15_000, 16_000, 25_000], "does not hold"),
])
def test_insert_verdict_follows_the_repeats(rates: list[float], expected: str) -> None:
    out = store.render(raw(rates, [1.5, 1.6, 1.7], [150, 160, 170]))
    measurement, result, cpu, goal, verdict, notes = cells(out["table"], "insert 100,000")
    assert goal == ">= 20,000 programs/s"
    assert verdict == expected
    assert result.startswith(f"{sorted(rates)[1]:,.0f} programs/s (")  # the median, then the interval
    assert f"{min(rates):,.0f} to {max(rates):,.0f}, 3 repeats" in result


def test_two_goals_are_judged_each_on_its_own_metric() -> None:
    ok = cells(store.render(raw([25_000] * 3, [1.5, 1.6, 1.7], [150, 160, 170]))["inspect"], "`qdevolve archive stats`")
    assert ok[4] == "<= 3 s: holds; <= 300 MB: holds"
    slow = cells(store.render(raw([25_000] * 3, [2.0, 3.5, 4.0], [150, 160, 170]))["inspect"],
                 "`qdevolve archive stats`")
    assert slow[4] == "<= 3 s: does not hold; <= 300 MB: holds"
    big = cells(store.render(raw([25_000] * 3, [1.5, 1.6, 1.7], [250, 290, 310]))["inspect"],
                "`qdevolve archive stats`")
    assert big[4] == "<= 3 s: holds; <= 300 MB: holds in the mean"
    assert "snapshot + 1,805 evaluations replayed" in big[5]


def test_ancestry_uses_the_median_call_of_each_repeat() -> None:
    row = cells(store.render(raw([25_000] * 3, [1.0] * 3, [100] * 3))["table"], "ancestry")
    assert row[1].startswith("46.0 ms (45.0 to 47.0, 3 repeats)")
    assert row[4] == "holds"


def test_a_goal_for_another_size_is_not_judged() -> None:
    row = cells(store.render(raw([25_000] * 3, [1.0] * 3, [100] * 3, programs=2_000))["table"], "insert 2,000")
    assert row[4].startswith("not judged (goal for 100,000 programs, measured 2,000 programs)")


def test_goal_rule_ends_and_single_repeat() -> None:
    iv = goals.interval([20_000.0, 20_000.0, 21_000.0])
    assert goals.judge(iv, {"op": ">=", "value": 20_000}) == "holds"
    assert goals.judge(iv, {"op": ">", "value": 20_000}) == "does not hold"  # the median equals the bound
    assert goals.judge(goals.interval([40.0, 45.0, 50.0]), {"op": "<", "value": 50}) == "holds in the mean"
    assert goals.judge(goals.interval([1.0]), {"op": "<=", "value": 3}) == "holds in the mean"  # no interval
    assert goals.goal_text({"op": "<=", "value": 3.0, "unit": "s"}) == "<= 3 s"
    assert goals.goal_text({"op": ">=", "value": 20000, "unit": "programs/s"}) == ">= 20,000 programs/s"


@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_vectorised_interval_equals_raw_bootstrap(n: int) -> None:
    import numpy as np

    rng = np.random.default_rng(n)
    values = list(rng.normal(10, 3, size=n))
    for stat in (np.median, np.mean):
        assert goals.interval(values, stat) == goals.bootstrap_interval(values, stat)  # _raw's
