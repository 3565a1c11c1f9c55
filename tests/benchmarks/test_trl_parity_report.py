"""benchmarks/reports/trl_parity.py renders the parity rows and the step timings from the raw numbers,
judges the parity claim against the stated tolerance and the timing claim "qdevolve's step is
faster than TRL's" on the ratio's bootstrap interval, both by rule: the verdicts flip when the
numbers do."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
_spec = importlib.util.spec_from_file_location("trl_parity_renderer", ROOT / "benchmarks" / "reports" / "trl_parity.py")
renderer = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(renderer)


def synthetic(trl_s: list[float], ours_s: list[float], adv: float = 5e-8, loss: float = 3e-8,
              tolerance: float = 1e-6) -> dict[str, Any]:
    rows = [{"loss_type": lt, "scale_rewards": sr, "beta": b, "adv_max_abs_diff": adv if i == 1 else 0.0,
             "loss_trl": 0.04, "loss_ours": 0.04 + (loss if i == 2 else 0.0), "loss_abs_diff": loss if i == 2 else 1e-9,
             "n_completions": 8.0, "reward_std": 0.8}
            for i, (lt, sr, b) in enumerate([("grpo", "group", 0.04), ("grpo", "none", 0.0), ("dapo", "group", 0.04)])]
    return {"meta": {"commit": "abc", "seeds": [0], "versions": {"trl": "1.16.0", "transformers": "5", "torch": "2"}},
            "settings": {"model": "tiny GPT-2", "prompts": 2, "group_size": 4, "max_new_tokens": 4, "epsilon": 0.2,
                         "noise": 0.05, "device": "cpu", "tolerance": tolerance, "timed_steps": len(trl_s),
                         "warmup_steps": 1, "order": "alternating",
                         "step": {"trl": "training_step", "ours": "PolicyTrainer.step"}},
            "rows": rows, "timing": {"setting": {"loss_type": "grpo", "scale_rewards": "group", "beta": 0.04},
                                     "trl_s": trl_s, "ours_s": ours_s}}


def _line(table: str, start: str) -> list[str]:
    (line,) = [ln for ln in table.splitlines() if ln.startswith(f"| {start} |")]
    return [c.strip() for c in line.strip("|").split("|")]


TRL = [1.00, 1.10, 0.90, 1.05, 0.95, 1.20, 1.00, 0.98]


def test_the_tables_follow_the_numbers() -> None:
    out = renderer.render(synthetic(TRL, [0.5 * t for t in TRL]))
    (row,) = [ln for ln in out["parity"].splitlines() if ln.startswith("| grpo | none |")]
    assert [c.strip() for c in row.strip("|").split("|")] == ["grpo", "none", "0.0", "5.00e-08", "0.040000",
                                                               "0.040000", "1.00e-09", "yes"]
    assert _line(out["timing"], "TRL")[2].startswith("1000.0 (")  # median of TRL in ms
    assert _line(out["timing"], "qdevolve")[2].startswith("500.0 (")
    assert _line(out["timing"], "ratio qdevolve / TRL")[2] == "0.50x (0.50x to 0.50x)"  # every pair's ratio is 0.5
    assert "over 8 timed steps" in out["timing"] and "trl 1.16.0" in out["setup"]
    assert "1e-06" in out["setup"]


def test_the_parity_verdict_flips_when_a_difference_exceeds_the_tolerance() -> None:
    ok = renderer.render(synthetic(TRL, TRL))["summary"]
    assert 'Parity claim "every advantage and loss difference <= 1e-06" over 3 settings: holds' in ok
    bad_adv = renderer.render(synthetic(TRL, TRL, adv=2e-6))
    assert "settings: does not hold (largest difference 2.00e-06)" in bad_adv["summary"]
    assert _line(bad_adv["parity"], "grpo | none")[-1] == "**no**"
    bad_loss = renderer.render(synthetic(TRL, TRL, loss=3e-5))["summary"]
    assert "settings: does not hold (largest difference 3.00e-05)" in bad_loss
    # the same numbers against a looser stated tolerance hold again: the rule reads the raw file's tolerance
    assert "over 3 settings: holds" in renderer.render(synthetic(TRL, TRL, loss=3e-5, tolerance=1e-4))["summary"]
    assert renderer.parity_verdict([], 1e-6)[0] == "does not hold"


def test_the_timing_claim_follows_the_interval() -> None:
    faster = renderer.render(synthetic(TRL, [0.6 * t for t in TRL]))["summary"]
    assert "\"qdevolve's step is faster than TRL's\" (ratio < 1) holds;" in faster
    assert "reading: qdevolve's step is faster." in faster
    slower = renderer.render(synthetic(TRL, [1.5 * t for t in TRL]))["summary"]
    assert "(ratio < 1) does not hold;" in slower and '"slower" (ratio > 1) holds' in slower
    assert "reading: qdevolve's step is slower." in slower
    noisy = [0.7, 1.3, 0.8, 1.2, 0.75, 1.25, 0.9, 1.05]  # median ratio just under 1, interval across it
    mixed = renderer.render(synthetic([1.0] * 8, noisy))["summary"]
    iv = renderer.step_intervals({"trl_s": [1.0] * 8, "ours_s": noisy})[2]
    assert iv.lo < 1 < iv.hi and iv.estimate < 1
    assert "(ratio < 1) holds in the mean;" in mixed and "reading: no difference shown" in mixed


def test_unpaired_timings_are_refused() -> None:
    with pytest.raises(ValueError, match="timed in pairs"):
        renderer.render(synthetic(TRL, TRL[:-1]))
