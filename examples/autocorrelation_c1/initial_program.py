"""First autocorrelation inequality: a non-negative step function f on [-1/4, 1/4] whose
autoconvolution peak max_t (f*f)(t) / (∫f)^2 is as small as possible (an upper bound on C1).

The evolvable part proposes step heights (any count); the fixed helper below makes them
finite and non-negative.
"""

import math


# EVOLVE-BLOCK-START
def step_heights():
    """Heights of f on n equal steps of [-1/4, 1/4] (scale does not matter)."""
    n = 40
    heights = []
    for i in range(n):
        x = (i + 0.5) / n * 2 - 1  # the step's centre, moved to [-1, 1]
        heights.append(1.0 + 0.3 * x * x - 0.2 * math.cos(3 * x))
    return heights
# EVOLVE-BLOCK-END


def run():
    """Finite, non-negative step heights (a plain list of floats)."""
    out = []
    for v in step_heights():
        v = float(v)
        out.append(v if math.isfinite(v) and v > 0 else 0.0)
    return out


if __name__ == "__main__":
    a = run()
    n = len(a)
    conv = [sum(a[i] * a[k - i] for i in range(max(0, k - n + 1), min(k, n - 1) + 1)) for k in range(2 * n - 1)]
    print(f"{n} steps, C1 bound {2 * n * max(conv) / sum(a) ** 2:.6f}")
