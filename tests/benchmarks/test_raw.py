"""benchmarks/_raw.py: raw files carry their provenance, intervals are seeded and exact, and a
verdict follows the interval rule (holds / holds in the mean / does not hold)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from _raw import Interval, bootstrap_interval, load_raw, verdict, write_raw  # noqa: E402


def _repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "benchmarks" / "results").mkdir(parents=True)
    (root / "code.py").write_text("x = 1\n")
    env = ["-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", *env, "-C", str(root), "add", "-A"], check=True)
    subprocess.run(["git", *env, "-C", str(root), "commit", "-qm", "c"], check=True)
    return root


def test_write_raw_meta_and_dirty_flag_ignores_results(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    (root / "benchmarks" / "results" / "other.json").write_text("{}")  # another benchmark's output
    path = write_raw("bench", {"seeds": [0, 1], "runs": [{"seed": 0, "value": 1.5}]}, command="python b.py --x 1",
                     root=root)
    raw = json.loads(path.read_text())
    meta = raw["meta"]
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert meta["commit"] == head and meta["dirty"] is False
    assert meta["command"] == "python b.py --x 1" and meta["seeds"] == [0, 1]
    assert len(meta["loadavg"]) == 3 and meta["machine"]["cpu_count"] >= 1 and "torch" in meta["machine"]
    assert meta["date"].endswith("Z") and raw["runs"] == [{"seed": 0, "value": 1.5}]
    (root / "code.py").write_text("x = 2\n")  # the code measured changed: dirty
    assert json.loads(write_raw("bench", {"seeds": [0]}, root=root).read_text())["meta"]["dirty"] is True
    assert load_raw("bench", root / "benchmarks" / "results")["meta"]["dirty"] is True


def test_write_raw_refuses_nan_and_own_meta(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    with pytest.raises(ValueError, match="not plain JSON"):
        write_raw("bench", {"value": math.nan}, root=root)
    with pytest.raises(ValueError, match="own 'meta'"):
        write_raw("bench", {"meta": {}}, root=root)
    with pytest.raises(FileNotFoundError, match="missing"):
        load_raw("absent", root / "benchmarks" / "results")


def test_bootstrap_is_seeded_and_exact_on_constant_values() -> None:
    values = [0.7, 0.9, 1.1, 0.8, 1.3]
    a, b = bootstrap_interval(values), bootstrap_interval(values)
    assert a == b  # same values, same seed: the same interval
    assert bootstrap_interval(values, seed=1) != a
    assert a.estimate == pytest.approx(np.mean(values)) and a.lo < a.estimate < a.hi
    assert min(values) <= a.lo and a.hi <= max(values)
    c = bootstrap_interval([2.0, 2.0, 2.0])
    assert (c.estimate, c.lo, c.hi) == (2.0, 2.0, 2.0)
    one = bootstrap_interval([3.0])
    assert one.lo is None and one.hi is None and one.n_units == 1


def test_bootstrap_paired_samples_and_unreached() -> None:
    # per seed: (qdevolve's calls, the other framework's calls); a ratio of medians
    pairs = [(10, 40), (20, 40), (15, 30), (12, 60), (30, 50)]
    iv = bootstrap_interval(pairs, lambda s: float(np.median(s[:, 0]) / np.median(s[:, 1])))
    assert iv.estimate == pytest.approx(15 / 40) and iv.lo <= iv.estimate <= iv.hi and iv.n_units == 5
    # a target not reached counts as infinitely many calls: the interval's upper end is inf, not NaN
    unreached = [(10, 40), (math.inf, 40), (15, 30)]
    iv2 = bootstrap_interval(unreached, lambda s: float(np.median(s[:, 0]) / np.median(s[:, 1])))
    assert math.isinf(iv2.hi) and not math.isnan(iv2.lo)
    assert "not reached" in iv2.text()
    with pytest.raises(ValueError, match="NaN"):
        bootstrap_interval([1.0, math.nan])
    with pytest.raises(ValueError, match="level"):
        bootstrap_interval([1.0, 2.0], level=1.0)
    with pytest.raises(ValueError, match="no values"):
        bootstrap_interval([])


@pytest.mark.parametrize(("iv", "null", "direction", "expected"), [
    (Interval(0.3, 0.1, 0.5, 0.9, 5), 0.0, "greater", "holds"),
    (Interval(0.3, 0.0, 0.5, 0.9, 5), 0.0, "greater", "holds in the mean"),  # an end on the null does not exclude it
    (Interval(0.3, -0.1, 0.5, 0.9, 5), 0.0, "greater", "holds in the mean"),
    (Interval(0.0, -0.1, 0.1, 0.9, 5), 0.0, "greater", "does not hold"),  # estimate on the null
    (Interval(-0.2, -0.4, -0.1, 0.9, 5), 0.0, "greater", "does not hold"),
    (Interval(0.4, 0.2, 0.49, 0.9, 10), 0.5, "less", "holds"),
    (Interval(0.4, 0.2, 0.5, 0.9, 10), 0.5, "less", "holds in the mean"),
    (Interval(0.6, 0.2, 0.9, 0.9, 10), 0.5, "less", "does not hold"),
    (Interval(math.inf, 1.0, math.inf, 0.9, 10), 0.5, "less", "does not hold"),
    (Interval(0.3, None, None, 0.9, 1), 0.0, "greater", "holds in the mean"),  # one seed: never "holds"
])
def test_verdict_rule(iv: Interval, null: float, direction: str, expected: str) -> None:
    assert verdict(iv, null, direction) == expected


def test_verdict_of_a_real_interval_follows_the_numbers() -> None:
    assert verdict(bootstrap_interval([0.2, 0.3, 0.25, 0.35]), 0.0, "greater") == "holds"
    assert verdict(bootstrap_interval([0.2, -0.3, 0.25, 0.1]), 0.0, "greater") == "holds in the mean"
    with pytest.raises(ValueError, match="direction"):
        verdict(Interval(1.0, 0.0, 2.0, 0.9, 3), 0.0, "above")
