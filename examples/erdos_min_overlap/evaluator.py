"""Evaluator for the Erdős minimum overlap problem (upper bounds on the constant M).

The program returns the heights h_0..h_{n-1} of a step function h on [0, 2], constant on
each of n equal steps of width d = 2/n. Validity, checked strictly: 1 <= n <= 20,000; every
height a finite float with 0 <= h_i <= 1 (no tolerance); the integral d * sum(h_i) equal to 1
within 1e-9 (absolute). An invalid function scores -1 (a valid one's bound is below 1, so
every valid h scores higher) with the reason in the artifacts.

The bound: M(h) = max over real shifts k of ∫ h(x) (1 - h)(x + k) dx, where both h and its
complement 1 - h live on [0, 2] (zero outside). For two step functions on the same grid this
is piecewise linear in k with breakpoints at multiples of d, so its maximum is attained at
k = m d and equals d * max_m sum_i h_i (1 - h_{i+m}): computed exactly here (a full
correlation of the two height vectors), not sampled. Score = -M (larger is better).
"""

import importlib.util
import math

import numpy as np

RECORD = 0.380871  # see README.md for the sources
MAX_STEPS = 20_000
MASS_TOL = 1e-9


def _load(program_path):
    spec = importlib.util.spec_from_file_location("candidate_program", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_heights(heights):
    """None when the step heights define a valid h, else the first violation (a sentence)."""
    n = len(heights)
    if not 1 <= n <= MAX_STEPS:
        return f"expected 1 to {MAX_STEPS} step heights, got {n}"
    for i, v in enumerate(heights):
        if not math.isfinite(v):
            return f"height {i} is not finite"
        if v < 0 or v > 1:
            return f"height {i} = {v!r} lies outside [0, 1]"
    mass = math.fsum(heights) * 2 / n
    if abs(mass - 1) > MASS_TOL:
        return f"the integral of h is {mass!r}, not 1 (tolerance {MASS_TOL})"
    return None


def overlap_bound(heights):
    """d * max_m sum_i h_i (1 - h_{i+m}) for the step function with these heights."""
    h = np.asarray(heights, dtype=np.float64)
    corr = np.correlate(1.0 - h, h, mode="full")  # every integer shift m, both signs
    return float(corr.max()) * 2 / len(h)


def _features(heights):
    """Behaviour descriptors: the number of steps (log scale) and the asymmetry of h."""
    n = len(heights)
    h = np.asarray(heights, dtype=np.float64)
    asym = float(np.abs(h - h[::-1]).mean()) if n else 0.0
    return {"log_steps": min(math.log10(max(n, 1)), 4.0), "asymmetry": min(asym, 1.0)}


def evaluate(program_path):
    module = _load(program_path)
    try:
        heights = [float(v) for v in module.run()]
    except (TypeError, ValueError) as exc:
        return {"combined_score": -1.0, "validity": 0.0, "artifacts": {"validation": f"malformed output: {exc}"}}
    problem = check_heights(heights)
    if problem is not None:
        return {"combined_score": -1.0, "validity": 0.0, "artifacts": {"validation": problem}}
    bound = overlap_bound(heights)
    return {"combined_score": -bound, "validity": 1.0, "overlap_bound": bound, "steps": float(len(heights)),
            "features": _features(heights),
            "artifacts": {"report": f"valid step function with {len(heights)} steps: overlap bound "
                                    f"{bound:.9f}; best known {RECORD} (gap {bound - RECORD:.6f})"}}
