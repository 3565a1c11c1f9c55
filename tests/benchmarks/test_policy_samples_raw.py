"""bench_policy_samples keeps only the records that entered a run's running top 10; the curves
(best score and top-10 mean at every call) rendered from them equal the curves of all records."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # subprocesses of report.py / torch imports: seconds each
sys.path.insert(0, str(ROOT / "benchmarks"))
pytest.importorskip("torch", reason="bench_policy_samples imports the joined loop's extras")
import bench_policy_samples as bench  # noqa: E402
from samples_report import curves as full_curves  # noqa: E402

spec = importlib.util.spec_from_file_location("policy_samples_renderer", ROOT / "benchmarks" / "reports" / "policy_samples.py")
renderer = importlib.util.module_from_spec(spec)
spec.loader.exec_module(renderer)


@pytest.mark.parametrize("seed", range(5))
def test_top10_records_keep_both_curves_exactly(seed: int) -> None:
    rng = random.Random(seed)
    calls = 300
    records = [(0, 0.2)] + sorted((rng.randrange(1, calls + 40), rng.choice([0.0, 0.2, 0.4, 0.6, 0.8, 1.0, rng.random()]))
                                  for _ in range(rng.randrange(5, 400)))
    kept = bench.top10_records(records)
    assert len(kept) < len(records) or len(records) <= 10
    best, top = full_curves(records, calls)
    b2, t2 = renderer.curves(kept, calls)
    np.testing.assert_allclose(b2, best, equal_nan=True)
    np.testing.assert_allclose(t2, top, equal_nan=True)


def test_a_record_outside_the_top10_is_dropped() -> None:
    records = [(c, 1.0) for c in range(10)] + [(10, 0.5), (11, 2.0)]
    assert [c for c, _ in bench.top10_records(records)] == [*range(10), 11]


def test_the_readme_summary_follows_the_example_default_arm_in_the_raw_file() -> None:
    import json

    raw = json.loads((ROOT / "benchmarks" / "results" / "policy_samples.json").read_text())
    text = renderer.summary(raw)
    assert renderer.DEFAULT_ARM in text and all(task in text for task in raw["tasks"])
    assert "not measured" in renderer.summary(raw, arm="no-such-arm")
    # the example's default is the arm the summary speaks for: its train section equals the bench arm's
    import yaml

    train = yaml.safe_load((ROOT / "examples" / "expr_evolution" / "config.yaml").read_text())["train"]
    arm = bench.ARMS[renderer.DEFAULT_ARM]
    assert train["objective"] == arm["objective"]
    assert {k: train[k] for k in arm["train"]} == arm["train"]


def test_the_spend_table_names_each_arms_reward_when_the_raw_file_records_it() -> None:
    raw = {"arm_settings": {a: bench.ARMS[a] for a in ("ips", "ips+all")}}
    assert renderer._reward_of(raw, "ips") == "score"
    assert renderer._reward_of(raw, "ips+all").startswith("improvement_clipped; lazy -0.3")
    assert renderer._reward_of({}, "ips") == "-"
