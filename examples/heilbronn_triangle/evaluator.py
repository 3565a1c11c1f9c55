"""Evaluator for Heilbronn's triangle problem with n = 8 points in the unit square.

score = min over the C(8, 3) = 56 triples {p, q, r} of area(p, q, r), where
area(p, q, r) = |(q - p) x (r - p)| / 2 (the shoelace formula). Larger is better. The best
known value for n = 8 is (sqrt(13) - 1) / 36 = 0.072376... (Comellas and Yebra, "New lower
bounds for Heilbronn numbers", Electronic Journal of Combinatorics 9, 2002, #R6).

Validation has zero tolerance: exactly 8 points, every coordinate a finite number in
[0, 1]. An invalid placement scores 0 with the reason in the artifacts. Behaviour
descriptors (``features``): the fraction of points on the square's boundary (within 1e-3)
and the smallest distance between two points.
"""

import importlib.util
import itertools
import math

N_POINTS = 8
BEST_KNOWN = (math.sqrt(13) - 1) / 36  # Comellas & Yebra 2002


def _load(program_path):
    spec = importlib.util.spec_from_file_location("candidate_program", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def validate(points):
    """None when ``points`` is a valid placement, else the first violation found."""
    if len(points) != N_POINTS:
        return f"expected {N_POINTS} points, got {len(points)}"
    for i, p in enumerate(points):
        if len(p) != 2 or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in p):
            return f"point {i} is not two finite numbers: {p!r}"
        if not all(0.0 <= v <= 1.0 for v in p):
            return f"point {i} at ({p[0]:.6f}, {p[1]:.6f}) leaves the unit square"
    return None


def triangle_area(p, q, r):
    """|(q - p) x (r - p)| / 2."""
    return abs((q[0] - p[0]) * (r[1] - p[1]) - (q[1] - p[1]) * (r[0] - p[0])) / 2.0


def min_area(points):
    """The smallest area over all triples of ``points``."""
    return min(triangle_area(p, q, r) for p, q, r in itertools.combinations(points, 3))


def _features(points):
    edge = sum(1 for x, y in points if min(x, y, 1 - x, 1 - y) < 1e-3)
    gap = min(math.dist(p, q) for p, q in itertools.combinations(points, 2))
    return {"boundary_fraction": edge / N_POINTS, "min_distance": min(gap, 0.6)}


def evaluate(program_path):
    points = _load(program_path).place_points()
    try:
        points = [tuple(float(v) for v in p) for p in points]
    except (TypeError, ValueError) as exc:
        return {"combined_score": 0.0, "validity": 0.0, "min_area": 0.0,
                "artifacts": {"validation": f"place_points() must return (x, y) pairs of numbers: {exc}"}}
    problem = validate(points)
    if problem is not None:
        return {"combined_score": 0.0, "validity": 0.0, "min_area": 0.0, "artifacts": {"validation": problem}}
    area = min_area(points)
    return {
        "combined_score": area,
        "validity": 1.0,
        "min_area": area,
        "target_ratio": area / BEST_KNOWN,
        "features": _features(points),
        "artifacts": {"report": f"valid placement, smallest triangle {area:.6f} "
                                f"({100 * area / BEST_KNOWN:.1f}% of the best known {BEST_KNOWN:.6f})"},
    }
