"""The lock comparison's renderer: the ratio and the count of faster runs follow the walls."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("real_join_lock", ROOT / "benchmarks" / "reports" / "real_join_lock.py")
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)


def _raw(before: float, after: float) -> dict:
    run = {"arm": "frozen", "seed": 0, "best_score": 0.9, "stop_reason": "budget", "calls": 16, "steps": 0}
    return {"before": {"label": "exclusive", "runs": [{**run, "wall_s": before}]},
            "after": {"label": "shared", "runs": [{**run, "wall_s": after}]}}


def test_faster_after() -> None:
    out = mod.render(_raw(400.0, 300.0))
    assert "| 0.75x |" in out["table"] and out["summary"].startswith("with the lock shared, 1 of 1 runs took less")


def test_slower_after_is_said() -> None:
    out = mod.render(_raw(300.0, 400.0))
    assert "| 1.33x |" in out["table"] and "0 of 1 runs took less" in out["summary"]


def test_no_common_run() -> None:
    raw = _raw(1.0, 1.0)
    raw["after"]["runs"][0]["arm"] = "grpo"
    assert mod.render(raw)["summary"] == "not measured"
