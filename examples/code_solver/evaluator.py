"""Evaluator for the maximum-subarray code solver.

Visible tests (24 cases) form the per-test vector ``tests`` (1.0 pass, 0.0 fail or error),
and ``combined_score`` is their mean. Hidden tests (40 random cases from a fixed seed,
checked against a brute-force reference, including long inputs that punish quadratic
solutions with a time limit) are counted only in the separate metric ``hidden_pass_rate``:
they never enter the score, so a model cannot fit them. Features: the solution's code
length (lines) and the fraction of hidden tests passed.
"""

import importlib.util
import random
import time

VISIBLE = [
    ([1], 1), ([-1], -1), ([0], 0), ([5, -2, 3], 6), ([-3, -1, -2], -1),
    ([2, -1, 2, -1, 2], 4), ([-2, 1, -3, 4, -1, 2, 1, -5, 4], 6), ([1, 2, 3, 4], 10),
    ([-5, -4, -3], -3), ([3, -10, 4], 4), ([0, 0, 0], 0), ([-1, 0, -2], 0),
    ([10, -20, 10, -20, 10], 10), ([4, -1, -1, 4], 6), ([-7], -7), ([1, -1, 1, -1, 1], 1),
    ([100, -1, -1, -1, 100], 197), ([-2, -3, 4, -1, -2, 1, 5, -3], 7), ([8, -19, 5, -4, 20], 21),
    ([-1, -1, -1, -1, 5], 5), ([2, 2, -5, 2, 2], 4), ([-10, 3, -1, 3, -10], 5),
    ([1] * 50, 50), ([-3] * 10, -3),
]


def _reference(nums):
    best = nums[0]
    for i in range(len(nums)):
        s = 0
        for j in range(i, len(nums)):
            s += nums[j]
            best = max(best, s)
    return best


def _hidden_cases():
    rng = random.Random(20261202)
    cases = []
    for _ in range(36):
        n = rng.randint(1, 30)
        nums = [rng.randint(-50, 50) for _ in range(n)]
        cases.append((nums, _reference(nums)))
    for _ in range(4):  # long inputs: expected value by a linear scan over prefix sums
        nums = [rng.randint(-100, 100) for _ in range(20000)]
        prefix, low, best = 0, 0, nums[0]
        for x in nums:
            prefix += x
            best = max(best, prefix - low)
            low = min(low, prefix)
        cases.append((nums, best))
    return cases


HIDDEN = _hidden_cases()


def _run(solve, nums, expected, time_limit=None):
    try:
        start = time.perf_counter()
        got = solve(list(nums))
        if time_limit is not None and time.perf_counter() - start > time_limit:
            return 0.0, "too slow"
        return (1.0, None) if got == expected else (0.0, f"solve({nums[:8]}{'...' if len(nums) > 8 else ''}) = {got!r}, expected {expected}")
    except Exception as exc:  # the candidate's bug, reported as a failed test
        return 0.0, f"{type(exc).__name__}: {exc}"


def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("candidate_program", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tests, failures = [], []
    for nums, expected in VISIBLE:
        ok, why = _run(module.solve, nums, expected)
        tests.append(ok)
        if why and len(failures) < 5:
            failures.append(why)
    hidden = [_run(module.solve, nums, exp, time_limit=0.5 if len(nums) > 1000 else None)[0]
              for nums, exp in HIDDEN]
    hidden_rate = sum(hidden) / len(hidden)
    with open(program_path, encoding="utf-8") as fh:
        n_lines = sum(1 for line in fh if line.strip())
    return {
        "combined_score": sum(tests) / len(tests),
        "visible_pass_rate": sum(tests) / len(tests),
        "hidden_pass_rate": hidden_rate,
        "tests": tests,
        "features": {"code_lines": float(n_lines), "hidden_pass_rate": hidden_rate},
        "artifacts": {"failures": "\n".join(failures) or "all visible tests pass"},
    }
