"""Erdős minimum overlap: a step function h on [0, 2] with values in [0, 1] and integral 1
whose largest overlap max_k ∫ h(x) (1 - h(x + k)) dx is as small as possible.

The evolvable part proposes step heights (any real numbers, any count); the fixed helper
below clips them to [0, 1] and shifts them so that the integral is exactly 1.
"""

import math


# EVOLVE-BLOCK-START
def step_heights():
    """Heights of the steps of h, equally spaced on [0, 2] (normalised afterwards)."""
    n = 48
    heights = []
    for i in range(n):
        x = (i + 0.5) / n * 2 - 1  # the step's centre, moved to [-1, 1]
        heights.append(0.5 + 0.2 * math.cos(math.pi * x) - 0.1 * x * x)
    return heights
# EVOLVE-BLOCK-END


def normalise(heights):
    """Clip to [0, 1] and add the constant c that makes the mean exactly 1/2 (integral 1)."""
    values = [min(max(float(v), 0.0), 1.0) if math.isfinite(float(v)) else 0.5 for v in heights] or [0.5]
    target = len(values) / 2
    lo, hi = -1.0, 1.0
    for _ in range(100):  # bisection on c: sum(clip(v + c)) is monotone in c
        c = (lo + hi) / 2
        if sum(min(max(v + c, 0.0), 1.0) for v in values) < target:
            lo = c
        else:
            hi = c
    values = [min(max(v + hi, 0.0), 1.0) for v in values]
    excess = sum(values) - target  # float residue of the bisection, taken off the largest values
    for i in sorted(range(len(values)), key=values.__getitem__, reverse=True):
        if abs(excess) < 1e-15:
            break
        new = min(max(values[i] - excess, 0.0), 1.0)
        excess -= values[i] - new
        values[i] = new
    return values


def run():
    """The normalised step heights of h on [0, 2] (a plain list of floats)."""
    return normalise(step_heights())


if __name__ == "__main__":
    h = run()
    n = len(h)
    best = max(sum(h[i] * (1 - h[i + m]) for i in range(n) if 0 <= i + m < n) for m in range(-n + 1, n))
    print(f"{n} steps, overlap bound {best * 2 / n:.6f}")
