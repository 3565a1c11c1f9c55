"""The LLM-loop renderer: per-pair throughput ratios, controller CPU per child and the verdict all
follow the raw rows (no canned sentence)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))


def _renderer():
    from reports import llm_loop

    return llm_loop


def _raw(q_wall: list[float], o_wall: list[float], q_cpu: float = 1.6, o_cpu: float = 0.4) -> dict:
    rows = []
    for rep, (qw, ow) in enumerate(zip(q_wall, o_wall, strict=True)):
        for fw, wall, cpu in (("qdevolve", qw, q_cpu), ("openevolve", ow, o_cpu)):
            rows.append({"framework": fw, "latency_s": 0.0, "repeat": rep, "wall_s": wall, "cpu_s": cpu,
                         "successful": 80, "evaluated": 80})
    return {"meta": {"loadavg_start": [2.0, 2.0, 2.0], "loadavg": [3.0, 3.0, 3.0]},
            "settings": {"backend": "local", "warm": True, "iterations": 80, "concurrency": 8}, "rows": rows}


def test_slower_on_every_pair_does_not_hold_and_the_cpu_column_is_per_child() -> None:
    out = _renderer().render(_raw([4.0, 4.2, 4.1, 3.9, 4.0], [2.0, 2.1, 2.0, 2.0, 2.1]))
    row = next(line for line in out["table"].splitlines() if line.startswith("| 0 s"))
    assert row.endswith("| 20.0; 5.0 | does not hold |")  # 1.6 s / 80 children, 0.4 s / 80
    assert "0.50x" in row.split(" | ")[4] and "0.50x" in out["summary"]


def test_faster_on_every_pair_holds() -> None:
    out = _renderer().render(_raw([2.0, 2.1, 2.0, 2.0, 2.1], [4.0, 4.2, 4.1, 3.9, 4.0]))
    assert out["table"].splitlines()[-1].endswith("| holds |")
    assert "load average 2-3" in out["summary"]
