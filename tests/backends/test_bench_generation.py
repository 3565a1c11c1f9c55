"""The generation benchmark's report: a pure function of the raw file, the target judged by
the bootstrap interval over seeds, and the roofline formula."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


report = _load("generation_report", ROOT / "benchmarks" / "reports" / "generation.py")


def raw(rates32: list[float], llama: list[float]) -> dict:
    runs = [{"engine": "transformers", "batch": 32, "seed": i, "tokens": int(r * 10), "seconds": 10.0,
             "cpu_seconds": 15.0, "loadavg": [1.0, 2.0]} for i, r in enumerate(rates32)]
    runs += [{"engine": "transformers", "batch": 1, "seed": i, "tokens": 100, "seconds": 10.0, "cpu_seconds": 20.0,
              "loadavg": [1.5, 1.5]} for i in range(len(rates32))]
    return {"meta": {"seeds": list(range(len(rates32)))},
            "settings": {"model": "m", "params": 135_000_000, "dtype": "float32", "threads": 2,
                         "omp_wait_policy": "PASSIVE", "new_tokens": 64, "group": 4, "temperature": 0.8},
            "roofline": {"gflops": 60.0, "gbs": 20.0, "tokens_per_s": {"1": 37.0, "32": 200.0}},
            "runs": runs,
            "llama_cpp": {"status": "measured", "threads": 2, "runs": [
                {"batch": 1, "seed": i, "tokens": int(r * 10), "seconds": 10.0, "loadavg": [1.0, 1.0]}
                for i, r in enumerate(llama)]}}


def test_the_target_needs_the_interval_above_100_not_only_the_mean():
    assert report.verdict([120.0, 130.0, 125.0]) == "holds"
    assert report.verdict([60.0, 200.0, 80.0]) == "holds in the mean"  # mean 113, interval reaches below 100
    assert report.verdict([90.0, 95.0, 99.0]) == "does not hold"
    assert report.verdict([150.0]) == "holds in the mean"  # one seed: no interval


def test_render_is_a_pure_function_of_the_raw_file_with_ratios_to_llama_and_roofline():
    r = raw([120.0, 130.0, 125.0], [50.0, 50.0, 50.0])
    a, b = report.render(r), report.render(r)
    assert a == b
    row = next(line for line in a["speed"].splitlines() if line.startswith("| transformers (float32) | 32 |"))
    assert "125.0 [" in row and "2.50x" in row and "62%" in row  # 125 / 50 llama, 125 / 200 roofline
    assert "| 75% |" in row  # CPU share: 15 CPU-s over 10 s x 2 threads
    assert a["batch32_tokens_per_s"] == "125.0" and a["llama_cpp_tokens_per_s"] == "50.0"
    assert "| 32 |" in a["target"] and "holds" in a["target"] and "| 1 |" not in a["target"]


def test_roofline_is_the_larger_of_compute_and_weight_reading_time():
    bench = _load("bench_generation", ROOT / "benchmarks" / "bench_generation.py")
    p = 100_000_000
    # batch 1: reading 400 MB at 20 GB/s (20 ms) beats 0.2 GFLOP at 60 GFLOPS (3.3 ms)
    assert abs(bench.roofline(p, 4, 1, 60.0, 20.0) - 50.0) < 1e-9
    # batch 64: 12.8 GFLOP at 60 GFLOPS (213 ms) dominates
    assert abs(bench.roofline(p, 4, 64, 60.0, 20.0) - 64 / (12.8 / 60.0)) < 1e-9
