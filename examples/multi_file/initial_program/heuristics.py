"""The heuristics: the coefficients the solver in main.py uses."""

# EVOLVE-BLOCK-START
def coefficients():
    return (0.5, 0.5, 0.5, 0.5)
# EVOLVE-BLOCK-END
