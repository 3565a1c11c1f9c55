"""Circle packing, n = 32: place 32 circles in the unit square, maximising the sum of radii.

The evolvable part places the centres; the fixed helper below gives each circle the
largest radius (greedy pairwise shrink) that keeps the packing strictly valid.
"""

import math

N_CIRCLES = 32


# EVOLVE-BLOCK-START
def place_centers():
    """Return N_CIRCLES (x, y) centres in the unit square: a centre circle and two rings."""
    centers = [(0.5, 0.5)]
    inner = 9
    for i in range(inner):
        angle = 2 * math.pi * i / inner
        centers.append((0.5 + 0.24 * math.cos(angle), 0.5 + 0.24 * math.sin(angle)))
    outer = N_CIRCLES - 1 - inner
    for i in range(outer):
        angle = 2 * math.pi * i / outer + 0.1
        centers.append((0.5 + 0.43 * math.cos(angle), 0.5 + 0.43 * math.sin(angle)))
    return [(min(max(x, 0.02), 0.98), min(max(y, 0.02), 0.98)) for x, y in centers]
# EVOLVE-BLOCK-END


def max_valid_radii(centers):
    """Largest radii (greedy, pairwise shrink) keeping circles inside the square and disjoint."""
    radii = [max(0.0, min(x, y, 1 - x, 1 - y)) for x, y in centers]
    n = len(centers)
    for i in range(n):
        for j in range(i + 1, n):
            d = math.dist(centers[i], centers[j])
            s = radii[i] + radii[j]
            if s > d:
                scale = d / s if s > 0 else 0.0
                radii[i] *= scale
                radii[j] *= scale
    return [r * (1 - 1e-9) for r in radii]


def run_packing():
    """(centres, radii, sum of radii) as plain lists and floats."""
    centers = [(float(x), float(y)) for x, y in place_centers()]
    radii = max_valid_radii(centers)
    return centers, radii, sum(radii)


if __name__ == "__main__":
    _, _, total = run_packing()
    print(f"sum of radii: {total:.6f}")
