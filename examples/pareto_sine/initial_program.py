"""Approximate sin(x) on [-pi, pi] with as few terms as the accuracy allows.

Two objectives trade off: ``accuracy`` (higher is better) against ``length`` (the program's
non-whitespace characters, lower is better). Each term buys accuracy with length."""

# EVOLVE-BLOCK-START
def approx(x):
    y = 0.0
    y += 1.0 * x
    y -= 0.166667 * x ** 3
    y += 0.00833333 * x ** 5
    y -= 0.000198413 * x ** 7
    y += 2.75573e-06 * x ** 9
    return y
# EVOLVE-BLOCK-END
