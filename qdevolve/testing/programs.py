"""Small seed programs for tests: a circle-packing program with one EVOLVE-BLOCK.

The packing places 26 circles in the unit square (a centre circle, an inner ring of 8 and
an outer ring of 17) and shrinks radii until no two circles overlap and all stay inside;
its score is the sum of radii. It is written for tests of the LLM operators and of the
scripted model, not as a competitive packing.
"""

from __future__ import annotations

__all__ = ["CIRCLE_PACKING", "CIRCLE_PACKING_VARIANT", "score_circle_packing"]

CIRCLE_PACKING = '''"""Pack 26 circles in the unit square, maximising the sum of radii."""
import math


# EVOLVE-BLOCK-START
def construct_packing():
    """Centres of 26 circles: a centre, an inner ring and an outer ring."""
    centers = [(0.5, 0.5)]
    for i in range(8):
        angle = 2 * math.pi * i / 8
        centers.append((0.5 + 0.25 * math.cos(angle), 0.5 + 0.25 * math.sin(angle)))
    for i in range(17):
        angle = 2 * math.pi * i / 17 + 0.1
        centers.append((0.5 + 0.42 * math.cos(angle), 0.5 + 0.42 * math.sin(angle)))
    return centers
# EVOLVE-BLOCK-END


def max_radii(centers):
    """Largest radii with no overlap and every circle inside the square."""
    radii = [max(0.0, min(x, y, 1 - x, 1 - y)) for x, y in centers]
    for _ in range(50):
        for i, (xi, yi) in enumerate(centers):
            for j, (xj, yj) in enumerate(centers):
                if i < j:
                    d = math.hypot(xi - xj, yi - yj)
                    if radii[i] + radii[j] > d:
                        scale = d / (radii[i] + radii[j]) if radii[i] + radii[j] > 0 else 0.0
                        radii[i] *= scale
                        radii[j] *= scale
    return radii


def run_packing():
    centers = construct_packing()
    radii = max_radii(centers)
    return centers, radii, sum(radii)
'''

CIRCLE_PACKING_VARIANT = CIRCLE_PACKING.replace("0.25 * math.cos", "0.27 * math.cos").replace(
    "0.42 * math.sin", "0.40 * math.sin"
)


def score_circle_packing(code: str) -> float:
    """Sum of radii of the packing ``code`` builds (runs the code: tests only)."""
    ns: dict = {}
    exec(compile(code, "<packing>", "exec"), ns)  # noqa: S102 - trusted test programs
    return float(ns["run_packing"]()[2])
