"""spread_points: 4 points in the unit square, as far apart as possible."""


# EVOLVE-BLOCK-START
def solve():
    a = 0.4
    b = 0.6
    return [(a, a), (b, a), (a, b), (b, b)]
# EVOLVE-BLOCK-END
