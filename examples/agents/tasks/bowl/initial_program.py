"""bowl: return the minimiser of a quadratic bowl (the constants are the answer)."""


# EVOLVE-BLOCK-START
def solve():
    x = 0.0
    y = 0.0
    z = 0.0
    return [x, y, z]
# EVOLVE-BLOCK-END
