"""Parity with TRL's GRPOTrainer (trl==1.16.0): advantages and loss on one fixed batch to 1e-5.

TRL generates and scores the batch with its own code on a tiny GPT-2 built from config (no
downloads); qdevolve's ``grpo`` objective and ``PolicyTrainer`` recompute advantages and the
loss from the same ids, rewards and old log-probs (see ``benchmarks/bench_trl_parity.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("trl", reason="TRL parity needs the 'parity' extra: pip install 'qdevolve[parity]' (trl==1.16.0)")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from bench_trl_parity import SETTINGS, run_parity  # noqa: E402


def test_trl_version_is_the_pinned_one() -> None:
    import trl

    assert trl.__version__ == "1.16.0"


def test_grpo_advantages_and_loss_match_trl(tmp_path: Path) -> None:
    res = run_parity(tmp_path, loss_type="grpo", beta=0.04, scale_rewards="group")
    assert res["reward_std"] > 0  # the batch carries signal
    assert res["loss_trl"] != 0.0  # ratios, clipping and KL are exercised
    assert res["adv_max_abs_diff"] < 1e-5
    assert res["loss_abs_diff"] < 1e-5


@pytest.mark.slow
@pytest.mark.parametrize("setting", SETTINGS[1:], ids=lambda s: f"{s['loss_type']}-{s['scale_rewards']}-b{s['beta']}")
def test_other_settings_match_trl(tmp_path: Path, setting: dict) -> None:
    res = run_parity(tmp_path, **setting)
    assert res["adv_max_abs_diff"] < 1e-5
    assert res["loss_abs_diff"] < 1e-5
