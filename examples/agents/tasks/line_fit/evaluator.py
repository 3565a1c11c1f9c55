"""line_fit: score = 1 / (1 + MSE) of y = a x + b against a hidden line."""

import importlib.util
import math

XS = [i / 5.0 - 1.0 for i in range(11)]
TRUE = (-1.3, 0.9)


def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("candidate_program", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    a, b = (float(v) for v in list(module.solve())[:2])
    if not (math.isfinite(a) and math.isfinite(b)):
        return {"combined_score": 0.0, "artifacts": {"error": "solve() must return two finite numbers"}}
    mse = sum((a * x + b - (TRUE[0] * x + TRUE[1])) ** 2 for x in XS) / len(XS)
    return {"combined_score": 1.0 / (1.0 + mse), "mse": mse, "artifacts": {"report": f"MSE {mse:.4g}"}}
