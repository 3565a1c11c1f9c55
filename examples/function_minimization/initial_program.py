"""Function minimisation: evolve a search algorithm that finds the global minimum of a
rugged 2-D function with a fixed budget of function evaluations."""

import math
import random


def objective(x, y):
    """A multi-modal function with many local minima on [-5, 5]^2."""
    return math.sin(x) * math.cos(y) + math.sin(x * y) + (x * x + y * y) / 20.0


# EVOLVE-BLOCK-START
def search_algorithm(budget=2000, bounds=(-5.0, 5.0), rng=None):
    """Random search: sample points uniformly and keep the best."""
    rng = rng or random.Random(0)
    lo, hi = bounds
    best_x = rng.uniform(lo, hi)
    best_y = rng.uniform(lo, hi)
    best_value = objective(best_x, best_y)
    for _ in range(budget - 1):
        x = rng.uniform(lo, hi)
        y = rng.uniform(lo, hi)
        value = objective(x, y)
        if value < best_value:
            best_x, best_y, best_value = x, y, value
    return best_x, best_y, best_value
# EVOLVE-BLOCK-END


def run_search(seed=0, budget=2000):
    return search_algorithm(budget=budget, rng=random.Random(seed))


if __name__ == "__main__":
    print(run_search())
