"""Evaluator for the first autocorrelation inequality (upper bounds on the constant C1).

C1 is the largest constant with max_{|t| <= 1/2} (f*f)(t) >= C1 (∫ f)^2 for every
non-negative f supported on [-1/4, 1/4]; any such f gives the upper bound
C1 <= max_t (f*f)(t) / (∫ f)^2.

The program returns the heights a_0..a_{n-1} of a step function f, constant on each of n
equal steps of width w = 1/(2n) covering [-1/4, 1/4]. Validity, checked strictly:
1 <= n <= 50,000; every height a finite float >= 0 (no tolerance); sum(a) > 0 and the sum
and the peak finite. For such f, f*f is piecewise linear with breakpoints at
t = -1/2 + k w, where it equals w * sum_{i+j=k-1} a_i a_j; so
max_t (f*f)(t) / (∫ f)^2 = 2n * max_k (a*a)_k / (sum a)^2 exactly (a full discrete
convolution, no sampling). Score = -bound (larger is better); invalid: -10 with the reason.
"""

import importlib.util
import math

import numpy as np

RECORD = 1.5028629  # see README.md for the sources
MAX_STEPS = 50_000


def _load(program_path):
    spec = importlib.util.spec_from_file_location("candidate_program", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_heights(heights):
    """None when the heights define a valid f, else the first violation (a sentence)."""
    n = len(heights)
    if not 1 <= n <= MAX_STEPS:
        return f"expected 1 to {MAX_STEPS} step heights, got {n}"
    for i, v in enumerate(heights):
        if not math.isfinite(v):
            return f"height {i} is not finite"
        if v < 0:
            return f"height {i} = {v!r} is negative"
    total = math.fsum(heights)
    if not (total > 0 and math.isfinite(total)):
        return f"the heights sum to {total!r}; f must have a positive, finite integral"
    return None


def c1_bound(heights):
    """max_t (f*f)(t) / (∫f)^2 for the step function with these heights on [-1/4, 1/4]."""
    a = np.asarray(heights, dtype=np.float64)
    a = a / a.max()  # scale-free: keeps the products in range
    if len(a) > 2000:
        size = 1 << (2 * len(a) - 1).bit_length()
        spec = np.fft.rfft(a, size)
        conv = np.fft.irfft(spec * spec, size)[: 2 * len(a) - 1]
    else:
        conv = np.convolve(a, a)
    return 2 * len(a) * float(conv.max()) / float(a.sum()) ** 2


def _features(heights):
    """Behaviour descriptors: the number of steps (log scale) and the fraction of zero steps."""
    n = len(heights)
    zeros = sum(1 for v in heights if v == 0) / max(n, 1)
    return {"log_steps": min(math.log10(max(n, 1)), 4.7), "zero_fraction": zeros}


def evaluate(program_path):
    module = _load(program_path)
    try:
        heights = [float(v) for v in module.run()]
    except (TypeError, ValueError) as exc:
        return {"combined_score": -10.0, "validity": 0.0, "artifacts": {"validation": f"malformed output: {exc}"}}
    problem = check_heights(heights)
    if problem is not None:
        return {"combined_score": -10.0, "validity": 0.0, "artifacts": {"validation": problem}}
    bound = c1_bound(heights)
    if not math.isfinite(bound):
        return {"combined_score": -10.0, "validity": 0.0, "artifacts": {"validation": "the bound is not finite"}}
    return {"combined_score": -bound, "validity": 1.0, "c1_bound": bound, "steps": float(len(heights)),
            "features": _features(heights),
            "artifacts": {"report": f"valid step function with {len(heights)} steps: C1 <= {bound:.9f}; "
                                    f"best known {RECORD} (gap {bound - RECORD:.6f})"}}
