"""benchmarks/reports/generation_threads.py renders the threads x wait policy x dtype table from
the raw measurements (every round of every row) and reads the CPU-per-token ratios to the 1-thread
float32 row by rule."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
_spec = importlib.util.spec_from_file_location("generation_threads_renderer",
                                               ROOT / "benchmarks" / "reports" / "generation_threads.py")
renderer = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(renderer)

ROWS = [("t1_unset_float32", 1, "unset", "float32"), ("t2_unset_float32", 2, "unset", "float32"),
        ("t2_passive_float32", 2, "PASSIVE", "float32")]


def synthetic(spin_cpu: list[float], passive_cpu: list[float]) -> dict[str, Any]:
    """512 tokens per batch; the reference takes 4 CPU s in 10 s every round; the others as given
    (CPU seconds per round), the spinning row at a fifth of the reference's speed."""
    cpu = {"t1_unset_float32": [4.0] * len(spin_cpu), "t2_unset_float32": spin_cpu, "t2_passive_float32": passive_cpu}
    wall = {"t1_unset_float32": 10.0, "t2_unset_float32": 50.0, "t2_passive_float32": 8.0}
    ms = []
    for rnd in range(len(spin_cpu)):
        for i, (key, *_rest) in enumerate(ROWS):
            load = 5.0 + rnd + i / 10
            ms.append({"row": key, "round": rnd, "position": i, "seed": rnd, "tokens": 512, "wall_s": wall[key],
                       "cpu_s": cpu[key][rnd], "load_before": {"load1": load, "runnable": 3, "tasks": 200},
                       "load_after": {"load1": load + 0.1, "runnable": 3, "tasks": 200}})
    return {"meta": {"commit": "abc", "seeds": list(range(len(spin_cpu)))},
            "settings": {"model": "smollm2-135m-instruct", "batch": 32, "group": 4, "new_tokens": 16,
                         "temperature": 0.8, "rounds": len(spin_cpu), "rounds_done": len(spin_cpu), "stopped": None,
                         "reference": "t1_unset_float32",
                         "rows": [{"key": k, "threads": t, "omp_wait_policy": o, "dtype": d} for k, t, o, d in ROWS]},
            "measurements": ms}


def _cells(table: str, threads: str, omp: str) -> list[str]:
    (line,) = [ln for ln in table.splitlines() if ln.startswith(f"| {threads} | {omp}")]
    return [c.strip() for c in line.strip("|").split("|")]


def test_the_table_follows_the_rounds() -> None:
    out = renderer.render(synthetic([40.0, 40.0, 40.0], [4.0, 4.4, 3.6]))
    ref = _cells(out["table"], "1", "unset")
    assert ref[3] == "51.2, 51.2, 51.2" and ref[4] == "51.2 (51.2 to 51.2)"  # 512 tokens in 10 s
    assert ref[5] == "128 (128 to 128)" and ref[6] == "40%" and ref[7] == ref[8] == "reference"
    spin = _cells(out["table"], "2", "unset (libgomp spins)")
    assert spin[4] == "10.2 (10.2 to 10.2)" and spin[5] == "13 (13 to 13)" and spin[6] == "40%"
    assert spin[7] == "0.20x (0.20x to 0.20x)" and spin[8] == "10.00x (10.00x to 10.00x)"
    assert spin[9] == "5.1-7.2"  # its loads: 5.1 + round, before and after
    assert out["cpu_ratio-t2_unset_float32"] == "10.00x (10.00x to 10.00x)" and out["tpc-t1_unset_float32"] == "128"
    assert out["load"] == "5.0 to 7.3" and "3 rounds" in out["setup"] and "batch 32 = 8 prompts x 4" in out["setup"]


def test_the_reading_is_judged_by_rule() -> None:
    out = renderer.render(synthetic([40.0, 40.0, 40.0], [4.0, 4.4, 3.6]))
    assert out["reading"].startswith("Against 1 thread in float32, per round (median of the ratios over 3 rounds")
    assert ("2 threads with spinning workers (`OMP_WAIT_POLICY` unset): 10.00x the CPU per token (10.00x to 10.00x; "
            "more CPU per token: holds) and 0.20x the wall tokens/s") in out["reading"]
    assert out["cpu_verdict-t2_passive_float32"] == "no difference"  # ratios 1.0, 1.1, 0.9: median 1
    mean_only = renderer.render(synthetic([40.0, 40.0, 40.0], [4.4, 4.8, 3.6]))  # ratios 1.1, 1.2, 0.9
    assert mean_only["cpu_verdict-t2_passive_float32"] == "more only in the mean: the interval contains 1"
    cheaper = renderer.render(synthetic([2.0, 2.0, 2.0], [2.0, 2.2, 1.8]))
    assert cheaper["cpu_verdict-t2_unset_float32"] == "less CPU per token: holds"
    assert cheaper["cpu_verdict-t2_passive_float32"] == "less CPU per token: holds"
    assert "0.50x the CPU per token (0.50x to 0.50x; less CPU per token: holds)" in cheaper["reading"]


def test_a_row_without_measurements_is_listed() -> None:
    raw = synthetic([40.0, 40.0], [4.0, 4.0])
    raw["measurements"] = [m for m in raw["measurements"] if m["row"] != "t2_passive_float32"]
    out = renderer.render(raw)
    assert "| 2 | PASSIVE | float32 | not measured |" in out["table"]


def test_the_cpu_facts_are_stated_when_recorded() -> None:
    raw = synthetic([40.0, 40.0], [4.0, 4.0])
    assert "cpu" not in renderer.render(raw)
    raw["settings"]["cpu"] = {"model": "AMD EPYC", "flags": {"avx2": True, "avx512f": False, "avx512_bf16": False,
                                                              "amx_bf16": False}}
    raw["settings"]["rows"][0]["child"] = {"cpu_capability": "AVX2"}
    out = renderer.render(raw)
    assert out["cpu"] == "CPU AMD EPYC: avx2; no avx512f, avx512_bf16, amx_bf16; torch's CPU capability AVX2."
    assert out["bf16_hardware"] == "no" and out["setup"].endswith(out["cpu"])
    raw["settings"]["cpu"]["flags"]["avx512_bf16"] = True
    assert renderer.render(raw)["bf16_hardware"] == "yes"
