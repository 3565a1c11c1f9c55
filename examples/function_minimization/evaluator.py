"""Evaluator for function minimisation.

Runs the candidate's search 5 times (seeds 0..4) with a budget of 2,000 function
evaluations (counted: a search that exceeds it is invalid), recomputes f at the returned
point (a search cannot lie about its value), and scores

    combined_score = mean over runs of 1 / (1 + (f(x, y) - f*))

where f* is the global minimum on [-5, 5]^2 (found by a dense grid plus local refinement
when the evaluator is imported). Also reports the reliability (fraction of runs within 0.01
of f*) and features: mean distance of the returned points to the minimiser, and their spread.
"""

import importlib.util
import math
import random
import statistics

BOUNDS = (-5.0, 5.0)
BUDGET = 2000
SEEDS = range(5)


def _f(x, y):
    return math.sin(x) * math.cos(y) + math.sin(x * y) + (x * x + y * y) / 20.0


def _global_minimum():
    lo, hi = BOUNDS
    n = 400
    best = (float("inf"), 0.0, 0.0)
    for i in range(n + 1):
        x = lo + (hi - lo) * i / n
        for j in range(n + 1):
            y = lo + (hi - lo) * j / n
            v = _f(x, y)
            if v < best[0]:
                best = (v, x, y)
    v, x, y = best
    step = (hi - lo) / n
    while step > 1e-9:
        improved = False
        for dx, dy in ((step, 0), (-step, 0), (0, step), (0, -step)):
            nx, ny = min(max(x + dx, lo), hi), min(max(y + dy, lo), hi)
            nv = _f(nx, ny)
            if nv < v:
                v, x, y, improved = nv, nx, ny, True
        if not improved:
            step /= 2
    return v, x, y


F_STAR, X_STAR, Y_STAR = _global_minimum()


def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("candidate_program", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    calls = [0]
    original = module.objective

    def counted(x, y):
        calls[0] += 1
        return original(x, y)

    module.objective = counted
    scores, hits, dists, points = [], 0, [], []
    for seed in SEEDS:
        calls[0] = 0
        x, y, _claimed = module.search_algorithm(budget=BUDGET, bounds=BOUNDS, rng=random.Random(seed))
        if calls[0] > BUDGET:
            return {"combined_score": 0.0, "artifacts": {"error": f"used {calls[0]} evaluations, budget {BUDGET}"}}
        x, y = float(x), float(y)
        if not (BOUNDS[0] <= x <= BOUNDS[1] and BOUNDS[0] <= y <= BOUNDS[1]):
            return {"combined_score": 0.0, "artifacts": {"error": f"point ({x}, {y}) outside the bounds"}}
        gap = max(0.0, _f(x, y) - F_STAR)
        scores.append(1.0 / (1.0 + gap))
        hits += gap < 0.01
        dists.append(math.dist((x, y), (X_STAR, Y_STAR)))
        points.append((x, y))
    spread = statistics.pstdev([p[0] for p in points]) + statistics.pstdev([p[1] for p in points])
    return {
        "combined_score": statistics.fmean(scores),
        "reliability": hits / len(SEEDS),
        "mean_distance": statistics.fmean(dists),
        "features": {"mean_distance": min(statistics.fmean(dists), 10.0), "spread": min(spread, 10.0)},
        "artifacts": {"report": f"global minimum {F_STAR:.5f} at ({X_STAR:.4f}, {Y_STAR:.4f}); "
                                f"{hits}/{len(SEEDS)} runs within 0.01"},
    }
