"""benchmarks/reports/sandbox.py renders every figure from the raw file's numbers (median with its
interval, nearest-rank p90, CPU per evaluation, rate, ratios to the reference, goal and warm-vs-cold
verdicts by rule), lists a backend that could not run with its reason; bench_sandbox records such a
backend as skipped instead of dropping it."""

from __future__ import annotations

import copy
import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
_spec = importlib.util.spec_from_file_location("sandbox_renderer", ROOT / "benchmarks" / "reports" / "sandbox.py")
renderer = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(renderer)


def _row(name: str, lat: list[float], cpu_s: float | None, evals: int, wall_s: float) -> dict[str, Any]:
    return {"name": name, "status": "measured", "n": len(lat), "latency_ms": lat, "cpu_s": cpu_s,
            "throughput": {"workers": 2, "evaluations": evals, "wall_s": wall_s}, "load1": [0.5, 0.5]}


def synthetic() -> dict[str, Any]:
    return {"meta": {"commit": "abcdef0123", "dirty": False, "date": "2026-01-01T00:00:00Z", "command": "python x",
                     "seeds": [], "loadavg": [0.5]},
            "settings": {"n": 5, "n_docker_fresh": 3, "throughput": 20, "docker_fresh_throughput": 10, "warmup": 3,
                         "workers": 2, "as_root": True,
                         "backends": ["in-process", "local", "local warm", "docker warm"],
                         "goals_p50_ms": {"local": 150.0, "local warm": 25.0, "docker warm": 150.0}},
            "backends": [_row("in-process", [1.0, 1.0, 1.0, 1.0, 1.0], 0.005, 100, 0.5),
                         _row("local", [10.0, 20.0, 30.0, 40.0, 50.0], 0.1, 20, 2.0),
                         _row("local warm", [6.0, 2.0, 4.0, 3.0, 5.0], 0.02, 20, 0.5),
                         {"name": "docker warm", "status": "skipped", "stage": "create",
                          "reason": "EvaluationSetupError: no Docker engine answers", "load1": [0.5, 0.5]}]}


def _line(table: str, label: str) -> list[str]:
    (line,) = [ln for ln in table.splitlines() if ln.startswith(f"| {label} |")]
    return [c.strip() for c in line.strip("|").split("|")]


def test_the_table_follows_the_numbers() -> None:
    out = renderer.render(synthetic())
    ref = _line(out["table"], "in-process (OpenEvolve-style, no isolation)")
    assert ref[1] == "5" and ref[2].startswith("1.00 (1.00 to 1.00)") and ref[3] == "1.00"
    assert ref[4] == "1.00" and ref[5] == "200.0" and ref[6] == "reference"
    cold = _line(out["table"], "local, cold")
    assert cold[2].startswith("30.0 (") and cold[3] == "50.0"  # median 30; nearest-rank p90 of 5 = the 5th
    assert cold[4] == "20.0" and cold[5] == "10.0"  # 0.1 s / 5 evaluations; 20 evaluations in 2 s
    assert cold[6].startswith("30.0x (") and cold[7] == "20.0x"  # 30 / 1 ms; 20 / 1 ms of CPU
    assert cold[8] == "150 ms: holds"  # every resampled median is <= 50 ms
    warm = _line(out["table"], "local, warm")
    assert warm[2].startswith("4.00 (") and warm[3] == "6.00" and warm[4] == "4.00" and warm[5] == "40.0"
    assert warm[8] == "25 ms: holds"
    docker = _line(out["table"], "docker, warm container")
    assert "skipped at create" in docker[2] and "no Docker engine answers" in docker[2]
    assert docker[8] == "150 ms: not measured"
    pair = _line(out["warm"], "local, warm")
    assert pair[1].startswith("7.50x (") and pair[2] == "holds"  # 30 / 4 ms
    assert pair[3] == "5.00x" and pair[4] == "4.00x"  # CPU 20 / 4 ms; rate 40 / 10 per s
    assert "not compared" in _line(out["warm"], "docker, warm container")[1]
    assert "docker warm (skipped at create" in out["summary"] and "holds: local, local warm" in out["summary"]
    assert "reference row: in-process" in out["setup"] and "3 warm-up runs" in out["setup"]


def test_a_slower_warm_path_turns_the_verdicts() -> None:
    raw = synthetic()
    raw["backends"][2]["latency_ms"] = [10 * x for x in raw["backends"][2]["latency_ms"]]  # median 40 ms
    out = renderer.render(raw)
    warm = _line(out["table"], "local, warm")
    assert warm[2].startswith("40.0 (") and warm[3] == "60.0" and warm[8] == "25 ms: does not hold"
    pair = _line(out["warm"], "local, warm")
    assert pair[1].startswith("0.75x (") and pair[2] == "does not hold"  # 30 / 40 ms
    assert "does not hold: local warm" in out["summary"]


def test_without_in_process_the_cheapest_backend_is_the_reference() -> None:
    raw = synthetic()
    raw["backends"] = raw["backends"][1:]
    out = renderer.render(raw)
    assert "p50 / local warm" in out["table"].splitlines()[0]
    assert _line(out["table"], "local, warm")[6] == "reference"
    assert _line(out["table"], "local, cold")[6].startswith("7.50x (")


def test_interval_ends_come_from_the_bootstrap() -> None:
    raw = synthetic()
    out = renderer.render(raw)
    iv = renderer.bootstrap_interval(raw["backends"][1]["latency_ms"], renderer.median)
    assert _line(out["table"], "local, cold")[2] == f"{iv.estimate:.1f} ({iv.lo:.1f} to {iv.hi:.1f})"
    shifted = copy.deepcopy(raw)
    shifted["backends"][1]["latency_ms"] = [x + 100 for x in raw["backends"][1]["latency_ms"]]
    cell = _line(renderer.render(shifted)["table"], "local, cold")[2]
    assert re.fullmatch(r"130\.0 \(1\d\d\.\d to 1\d\d\.\d\)", cell)


def test_bench_sandbox_records_a_backend_that_cannot_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import bench_sandbox as bench

    def no_engine(name: str, evaluator: Path) -> Any:
        raise RuntimeError("no Docker engine answers")

    monkeypatch.setattr(bench, "make_box", no_engine)
    entry = bench.one_backend("docker warm", tmp_path / "evaluator.py", 3, 4, bench.SandboxLimits())
    assert entry["status"] == "skipped" and entry["stage"] == "create"
    assert entry["reason"] == "RuntimeError: no Docker engine answers"

    class Broken:
        closed = False

        def evaluate(self, program: Any, evaluator: Any = None, limits: Any = None) -> Any:
            return type("R", (), {"status": "error", "score": None, "error": "image missing"})()

        def close(self) -> None:
            Broken.closed = True

    monkeypatch.setattr(bench, "make_box", lambda name, evaluator: Broken())
    entry = bench.one_backend("docker fresh", tmp_path / "evaluator.py", 3, 4, bench.SandboxLimits())
    assert entry["status"] == "skipped" and entry["stage"] == "warm-up" and "image missing" in entry["reason"]
    assert Broken.closed


def test_the_fast_median_is_numpys() -> None:
    rng = renderer.np.random.default_rng(0)
    for n in (1, 2, 5, 60):
        x = rng.exponential(10.0, n)
        assert renderer.median(x) == float(renderer.np.median(x))
        assert renderer.median(renderer.np.concatenate([x, [renderer.np.nan] * 3])) == float(renderer.np.median(x))
    assert renderer.np.isnan(renderer.median(renderer.np.array([renderer.np.nan])))


def test_unequal_counts_give_the_ratio_of_the_medians() -> None:
    raw = synthetic()
    raw["backends"][1]["latency_ms"] = [10.0, 30.0, 50.0]  # 3 evaluations against the reference's 5
    raw["backends"][1]["n"] = 3
    cell = _line(renderer.render(raw)["table"], "local, cold")[6]
    assert cell.startswith("30.0x (")
