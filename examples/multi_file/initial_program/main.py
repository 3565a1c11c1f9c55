"""The solver: fits a cubic to samples of a target curve with the weights from heuristics.py.

The evaluator is handed this file (program_path); heuristics.py lies beside it and is
imported as a sibling module, as `python main.py` would.
"""

import heuristics

# EVOLVE-BLOCK-START
SCALE = 1.0
OFFSET = 0.0


def predict(x):
    a, b, c, d = heuristics.coefficients()
    return SCALE * (a + b * x + c * x * x + d * x * x * x) + OFFSET
# EVOLVE-BLOCK-END


def solve(xs):
    return [predict(x) for x in xs]
