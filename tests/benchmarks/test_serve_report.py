"""benchmarks/reports/serve.py renders serve.json's rows by rule: the first-view goal (<= 2 s on
100,000 programs) is judged on the repeats' median and bootstrap interval, so its verdict follows
the numbers; a run of another size is not judged; a measurement the raw file lacks, or that
failed, is listed as not measured with the reason, and the renderer never raises on it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _module(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"bench_report_serve_{name.lstrip('_')}",
                                                  ROOT / "benchmarks" / "reports" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # report.py's dataclasses look their module up
    spec.loader.exec_module(module)
    return module


serve = _module("serve")

GOAL = [{"metric": "wall_s", "op": "<=", "value": 2, "unit": "s", "applies_to": {"programs": 100_000}}]


def raw(first: list[float], programs: int = 100_000) -> dict[str, Any]:
    """A raw file of len(first) repeats with every measurement, the first views taking ``first`` s."""
    rows: list[dict[str, Any]] = []
    for k, wall in enumerate(first):
        base = {"repeat": k, "programs": programs, "loadavg": 1.0 + k}
        rows += [
            {"kind": "api_cold", **base, "wall_s": 2.0 + k / 10, "cpu_s": 1.5, "goals": []},
            {"kind": "server_start", **base, "wall_s": 3.0, "goals": []},
            {"kind": "first_view", **base, "wall_s": wall, "server_cpu_s": 0.2 + k / 100, "browser_cpu_s": 1.1,
             "tree_nodes": 1000, "tree_programs": programs, "goals": GOAL},
            {"kind": "later_view", **base, "view_wall_s": [0.9, 1.0 + k / 10, 1.5], "goals": []},
            {"kind": "api_cached", **base, "call_wall_s": [0.05, 0.06, 0.2], "path": "/api/runs/r/tree", "goals": []},
            {"kind": "api_filtered", **base, "call_wall_s": [0.08, 0.09, 0.1], "path": "/api/runs/r/tree?x",
             "goals": []},
            {"kind": "archive_page", **base, "wall_s": 1.2, "goals": []},
        ]
    return {"meta": {"chromium": "Chromium 156"},
            "settings": {"programs": programs, "repeats": len(first), "views": 3, "calls": 3, "seed": 0,
                         "database_bytes": 45_000_000, "database_written_s": 6.6, "goals": {"first_view": GOAL}},
            "rows": rows}


def cells(text: str, label: str) -> list[str]:
    line = next(ln for ln in text.splitlines() if ln.startswith(f"| {label}"))
    return [c.strip() for c in line.strip("|").split("|")]


@pytest.mark.parametrize(("first", "expected"), [
    ([1.0, 1.1, 1.2], "holds"),
    ([1.5, 1.9, 2.5], "holds in the mean"),  # the median meets the goal, the upper end does not
    ([2.1, 2.2, 2.3], "does not hold"),
    ([1.0, 2.0, 2.0], "holds"),  # <= : an end equal to the goal meets it
])
def test_first_view_verdict_follows_the_repeats(first: list[float], expected: str) -> None:
    out = serve.render(raw(first))
    _, result, cpu, goal, verdict, notes = cells(out["table"], "first view")
    assert goal == "<= 2 s"
    assert verdict == expected == out["verdict"]
    assert result == f"{sorted(first)[1]:.2f} s ({min(first):.2f} to {max(first):.2f}, 3 repeats)" == out["first_view"]
    assert cpu.startswith("server 0.21 s (0.20 to 0.22, 3 repeats); browser 1.10 s")
    assert "1,000 of 100,000 programs drawn" in notes and "load 1.0 to 3.0" in notes


def test_the_verdict_flips_when_the_numbers_flip() -> None:
    fast, slow = raw([1.0, 1.1, 1.2]), raw([2.4, 2.5, 2.6])
    assert serve.render(fast)["verdict"] == "holds"
    assert serve.render(slow)["verdict"] == "does not hold"
    for r in fast["rows"]:  # the same file, first views slowed: the verdict follows
        if r["kind"] == "first_view":
            r["wall_s"] += 1.5
    assert serve.render(fast)["verdict"] == "does not hold"


def test_one_repeat_has_no_interval_and_holds_in_the_mean_only() -> None:
    out = serve.render(raw([1.0]))
    assert out["first_view"] == "1.00 s (1 repeat)"
    assert out["verdict"] == "holds in the mean"


def test_a_run_of_another_size_is_not_judged() -> None:
    out = serve.render(raw([0.5, 0.6, 0.7], programs=2_000))
    assert out["verdict"] == "not judged (goal for 100,000 programs, measured 2,000 programs)"
    assert "Synthetic run of 2,000 programs" in out["setup"]


def test_per_repeat_medians_of_calls() -> None:
    out = serve.render(raw([1.0, 1.1, 1.2]))
    assert cells(out["table"], "tree API, lineage cached")[1] == "60 ms (60 to 60, 3 repeats)"
    assert cells(out["table"], "later views")[1] == "1.10 s (1.00 to 1.20, 3 repeats)"
    assert cells(out["table"], "later views")[0].endswith("(per repeat the median of 3 views)")
    assert cells(out["table"], "tree API, cold")[2] == "1.50 s (1.50 to 1.50, 3 repeats)"


def test_a_missing_measurement_is_listed_with_the_reason() -> None:
    r = raw([1.0, 1.1, 1.2])
    r["rows"] = [x for x in r["rows"] if x["kind"] not in ("api_cold", "first_view")]
    out = serve.render(r)
    cold = cells(out["table"], "tree API, cold")
    assert cold[1] == "not measured: no `api_cold` rows in `benchmarks/results/serve.json`"
    first = cells(out["table"], "first view")
    assert first[1].startswith("not measured: no `first_view` rows")
    assert first[3:5] == ["<= 2 s", "not judged (not measured)"]  # the goal from the settings, no verdict
    assert out["verdict"] == "not judged (not measured)"
    assert out["first_view"].startswith("not measured")
    assert len([ln for ln in out["table"].splitlines() if ln.startswith("| ")]) == 1 + len(serve.MEASUREMENTS)  # header + one per measurement


def test_failed_repeats_are_named_and_left_out_of_the_figure() -> None:
    r = raw([1.0, 1.1, 5.0])
    fv = [x for x in r["rows"] if x["kind"] == "first_view"]
    fv[2].pop("wall_s")
    fv[2]["error"] = "TimeoutError: 'document.body.dataset.treeReady' still false after 120.0s"
    out = serve.render(r)
    _, result, _, _, verdict, notes = cells(out["table"], "first view")
    assert result == "1.05 s (1.00 to 1.10, 2 repeats)"
    assert verdict == "holds"
    assert "failed in repeat 2 (TimeoutError: 'document.body.dataset.treeReady' still false" in notes
    for x in fv[:2]:
        x.pop("wall_s")
        x["error"] = "RuntimeError: no server (its start failed)"
    out = serve.render(r)
    assert cells(out["table"], "first view")[1] == "not measured: failed in all 3 repeats"
    assert out["verdict"] == "not judged (not measured)"


def test_an_empty_raw_file_renders_messages_not_errors() -> None:
    out = serve.render({"meta": {}})
    assert set(out) >= {"table", "setup", "first_view", "verdict", "first_view_cpu", "load"}
    assert out["setup"] == "(no settings in `benchmarks/results/serve.json`)"
    assert out["first_view_cpu"] == "-" and out["load"] == "not recorded"
    assert all("not measured" in ln for ln in out["table"].splitlines()[2:])
