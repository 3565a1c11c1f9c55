"""The trainer-step renderer: ratios per round, their interval and the verdict follow the seconds."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("trainer_step", ROOT / "benchmarks" / "reports" / "trainer_step.py")
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)

SETTINGS = {"model": "smollm2-135m-instruct", "lora_r": 4, "groups": 2, "group": 4, "completion_tokens": 115,
            "prompt_tokens": [560, 567], "threads": 1, "dtype": "float32"}


def _raw(pairs: list[tuple[float, float]], diff: float = 1e-6) -> dict:
    rounds = [{"round": i, "one_pass": {"train_s": one, "no_grad_s": one / 3, "load": 1.0},
               "shared": {"train_s": sh, "no_grad_s": sh / 3, "load": 1.0}, "max_abs_logp_diff": diff}
              for i, (one, sh) in enumerate(pairs)]
    return {"settings": SETTINGS, "rounds": rounds}


def test_a_cheaper_shared_pass_in_every_round_holds() -> None:
    out = mod.render(_raw([(100.0, 25.0), (110.0, 30.0), (90.0, 27.0)]))
    assert out["train_ratio"].startswith("0.27x (90 % interval 0.25x to 0.30x, 3 rounds)")
    assert out["train_ratio"].endswith(": holds")
    assert "| 100.0 [90.0 to 110.0] | 27.0 [25.0 to 30.0] |" in out["table"]
    assert "2 groups x 4 completions (8 rows) of 115 tokens on prompts of 560, 567 tokens" in out["setup"]


def test_a_slower_round_leaves_it_in_the_mean_and_a_slower_median_does_not_hold() -> None:
    assert mod.render(_raw([(100.0, 25.0), (100.0, 120.0), (100.0, 40.0)]))["train_ratio"].endswith(
        "holds in the mean")
    assert mod.render(_raw([(100.0, 125.0), (100.0, 120.0), (100.0, 40.0)]))["train_ratio"].endswith(
        "does not hold")


def test_the_largest_logprob_difference_is_shown() -> None:
    assert "every round: 3.0e-06." in mod.render(_raw([(1.0, 0.5), (1.0, 0.5)], diff=3e-6))["table"]
