"""The problems with headroom (circle packing n = 32, Erdős minimum overlap, first
autocorrelation inequality): strict validity checks, exact bounds, and (slow) a run of each
from a fresh copy with the offline ``ast`` mutator that improves its seed and prints the gap
to the record."""

from __future__ import annotations

import importlib.util
import math
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
HEADROOM = ("circle_packing_32", "erdos_min_overlap", "autocorrelation_c1")


def _evaluator(name: str):
    spec = importlib.util.spec_from_file_location(f"ev_{name}", EXAMPLES / name / "evaluator.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_circle_packing_32_check_is_strict() -> None:
    ev = _evaluator("circle_packing_32")
    grid = [((i % 6 + 0.5) / 6, (i // 6 + 0.5) / 6) for i in range(32)]
    radii = [1 / 12 - 1e-15] * 32  # neighbours and walls within 1e-15: valid
    assert ev.check_packing(grid, radii) is None
    assert "and 7 overlap by" in ev.check_packing(grid, radii[:7] + [1 / 12 + 1e-12] + radii[8:])  # interior
    moved = [(grid[0][0] - 1e-12, grid[0][1])] + grid[1:]
    assert "leaves the unit square" in ev.check_packing(moved, radii)
    assert "expected 32" in ev.check_packing(grid[:31], radii[:31])
    assert "negative" in ev.check_packing(grid, [-1e-300] + radii[1:])
    assert "non-finite" in ev.check_packing(grid, [math.nan] + radii[1:])


def test_erdos_check_is_strict_and_the_bound_exact() -> None:
    ev = _evaluator("erdos_min_overlap")
    assert ev.overlap_bound([0.5] * 10) == pytest.approx(0.5)
    assert ev.overlap_bound([1 / 3, 2 / 3]) == pytest.approx(4 / 9)  # Haugland's 2-step function
    assert ev.check_heights([0.5] * 10) is None
    assert "outside [0, 1]" in ev.check_heights([1 + 1e-15] + [0.5] * 8 + [0.5 - 1e-15])
    assert "not 1" in ev.check_heights([0.5 + 1e-8] * 10)
    assert "not finite" in ev.check_heights([math.inf] + [0.5] * 9)
    # the exact bound equals a brute-force maximum over fine continuous shifts
    rng = np.random.default_rng(0)
    h = rng.uniform(0.2, 0.8, 6)
    h = list(h / h.sum() * 3)
    n, xs = 6, (np.arange(60_000) + 0.5) / 30_000  # midpoints on [0, 2]
    hx = np.asarray(h)[np.minimum((xs * n / 2).astype(int), n - 1)]
    brute = 0.0
    for k in np.linspace(-2, 2, 1201):  # shifts on a grid containing every multiple of 2/n
        y = xs + k
        inside = (y >= 0) & (y < 2)
        g = np.where(inside, 1 - np.asarray(h)[np.clip((y * n / 2).astype(int), 0, n - 1)], 0.0)
        brute = max(brute, float((hx * g).sum() / 30_000))
    assert ev.overlap_bound(h) == pytest.approx(brute, abs=1e-4)
    assert ev.overlap_bound(h) >= brute - 1e-9  # never below a sampled shift


def test_c1_check_is_strict_and_the_bound_exact() -> None:
    ev = _evaluator("autocorrelation_c1")
    assert ev.c1_bound([1.0] * 7) == pytest.approx(2.0)  # the indicator of [-1/4, 1/4]
    assert "negative" in ev.check_heights([1.0, -1e-300, 1.0])
    assert "not finite" in ev.check_heights([1.0, math.nan])
    assert "positive, finite integral" in ev.check_heights([0.0, 0.0])
    assert "expected 1 to" in ev.check_heights([])
    a = list(np.random.default_rng(1).uniform(0, 1, 5))
    n, w = 5, 1 / 10
    xs = -0.25 + (np.arange(20_000) + 0.5) * (0.5 / 20_000)
    f = lambda x: np.where((x >= -0.25) & (x < 0.25), np.asarray(a)[np.clip(((x + 0.25) / w).astype(int), 0, n - 1)], 0.0)  # noqa: E731
    peak = max(float((f(xs) * f(t - xs)).sum() * 0.5 / 20_000) for t in np.linspace(-0.5, 0.5, 1001))
    assert ev.c1_bound(a) == pytest.approx(peak / (sum(a) * w) ** 2, rel=1e-3)
    big = list(np.random.default_rng(2).uniform(0, 1, 3000))  # the FFT path agrees with the direct one
    arr = np.asarray(big)
    assert ev.c1_bound(big) == pytest.approx(2 * 3000 * np.convolve(arr, arr).max() / arr.sum() ** 2, rel=1e-12)


@pytest.mark.parametrize("name", HEADROOM)
def test_each_seed_is_valid_and_below_its_record(name: str) -> None:
    ev = _evaluator(name)
    result = ev.evaluate(str(EXAMPLES / name / "initial_program.py"))
    assert result["validity"] == 1.0, result["artifacts"]
    assert "record:" in (EXAMPLES / name / "config.yaml").read_text()
    assert "gap" in result["artifacts"]["report"]


@pytest.mark.slow
@pytest.mark.parametrize("name", HEADROOM)
def test_example_runs_offline_from_a_fresh_copy_improves_and_shows_the_gap(name: str, tmp_path: Path) -> None:
    copy = tmp_path / name
    shutil.copytree(EXAMPLES / name, copy)
    env = {**os.environ, "COLUMNS": "240", "NO_COLOR": "1"}
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "qdevolve", "run", str(copy), "--iterations", "200",
                          "--db", str(tmp_path / "run.sqlite")], capture_output=True, text=True, env=env,
                         timeout=600, cwd=tmp_path)
    elapsed = time.monotonic() - t0
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    text = re.sub(r"\s*│\s*", " ", out.stdout)
    seed = float(re.search(r"seed score\s+(-?[0-9.e+-]+)", text).group(1))
    best = float(re.search(r"best score\s+(-?[0-9.e+-]+)", text).group(1))
    assert best > seed, text[-2000:]
    assert re.search(r"best known\s+best -?[0-9.]+, record [0-9.]+ \(.+\), gap \+", text), text[-2000:]
    assert elapsed < 120, f"{name}: 200 iterations took {elapsed:.0f} s"
