"""bowl: score = 1 / (1 + f(p) - f*) for the point p the program returns."""

import importlib.util
import math

CENTRE = (1.7, -2.3, 0.8)
WEIGHTS = (1.0, 0.5, 2.0)


def _f(p):
    return sum(w * (a - c) ** 2 for w, a, c in zip(WEIGHTS, p, CENTRE, strict=True))


def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("candidate_program", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    p = [float(v) for v in list(module.solve())[:3]]
    if len(p) != 3 or not all(math.isfinite(v) for v in p):
        return {"combined_score": 0.0, "artifacts": {"error": "solve() must return three finite numbers"}}
    gap = _f(p)
    return {"combined_score": 1.0 / (1.0 + gap), "gap": gap,
            "artifacts": {"report": f"f(p) - f* = {gap:.4g}"}}
