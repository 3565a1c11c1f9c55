"""wave_fit: score = 1 / (1 + MSE) of a sin(x) + b cos(x) + c against a hidden curve."""

import importlib.util
import math

XS = [i * 0.3 - 3.0 for i in range(21)]
TRUE = (1.4, -0.7, 0.5)


def _y(p, x):
    return p[0] * math.sin(x) + p[1] * math.cos(x) + p[2]


def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("candidate_program", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    p = [float(v) for v in list(module.solve())[:3]]
    if len(p) != 3 or not all(math.isfinite(v) for v in p):
        return {"combined_score": 0.0, "artifacts": {"error": "solve() must return three finite numbers"}}
    mse = sum((_y(p, x) - _y(TRUE, x)) ** 2 for x in XS) / len(XS)
    return {"combined_score": 1.0 / (1.0 + mse), "mse": mse, "artifacts": {"report": f"MSE {mse:.4g}"}}
