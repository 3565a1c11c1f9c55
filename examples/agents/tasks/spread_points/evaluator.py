"""spread_points: score = min pairwise distance of 4 points in [0, 1]^2 / 1.0 (the optimum)."""

import importlib.util
import itertools
import math


def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("candidate_program", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    pts = [(float(x), float(y)) for x, y in list(module.solve())[:4]]
    if len(pts) != 4:
        return {"combined_score": 0.0, "artifacts": {"error": "solve() must return 4 points"}}
    for x, y in pts:
        if not (0.0 <= x <= 1.0 and 0.0 <= y <= 1.0) or not (math.isfinite(x) and math.isfinite(y)):
            return {"combined_score": 0.0, "artifacts": {"error": f"point ({x}, {y}) is outside the unit square"}}
    d = min(math.dist(p, q) for p, q in itertools.combinations(pts, 2))
    return {"combined_score": d, "min_distance": d, "artifacts": {"report": f"min distance {d:.4f} (optimum 1)"}}
