"""line_fit: the slope and intercept of a line (the constants are the answer)."""


# EVOLVE-BLOCK-START
def solve():
    a = 1.0
    b = 0.0
    return [a, b]
# EVOLVE-BLOCK-END
