"""Evaluator of the small-model knapsack example.

Twelve fixed 0/1 knapsack instances (built from a seeded generator, so nothing is stored
beside this file): 40 items, integer values in [1, 100] and weights in [1, 60], capacity
a quarter to a half of the total weight. The candidate's ``pack`` chooses the items; the
evaluator checks the choice itself (indices valid and distinct, weight within capacity)
and scores each instance by ``value packed / optimum`` (the optimum by dynamic programming
over capacities). ``combined_score`` is the mean ratio (1.0: every instance optimal);
the features are the worst instance's ratio and the mean share of the capacity used.
"""

import importlib.util
import random

N_INSTANCES, N_ITEMS = 12, 40


def instances():
    rng = random.Random(20261204)
    out = []
    for k in range(N_INSTANCES):
        items = [(rng.randint(1, 100), rng.randint(1, 60)) for _ in range(N_ITEMS)]
        if k % 3 == 1:  # value tied to weight: ratios close, the greedy order matters more
            items = [(w + rng.randint(0, 10), w) for _, w in items]
        total = sum(w for _, w in items)
        out.append((items, int(total * rng.uniform(0.25, 0.5))))
    return out


def optimum(items, capacity):
    best = [0] * (capacity + 1)
    for value, weight in items:
        for c in range(capacity, weight - 1, -1):
            best[c] = max(best[c], best[c - weight] + value)
    return best[capacity]


def load(program_path):
    spec = importlib.util.spec_from_file_location("candidate", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check(items, capacity, taken):
    """The packed value, or ValueError naming what is wrong with ``taken``."""
    if not isinstance(taken, list) or any(type(i) is not int or not 0 <= i < len(items) for i in taken):
        raise ValueError("pack() must return a list of item indices")
    if len(set(taken)) != len(taken):
        raise ValueError("pack() took an item twice")
    weight = sum(items[i][1] for i in taken)
    if weight > capacity:
        raise ValueError(f"the bag weighs {weight} > capacity {capacity}")
    return sum(items[i][0] for i in taken)


def evaluate(program_path):
    program = load(program_path)
    ratios, fills, worst = [], [], None
    for k, (items, capacity) in enumerate(instances()):
        taken = program.pack(items, capacity)  # runs in the candidate's process; plain data comes back
        ratio = check(items, capacity, taken) / optimum(items, capacity)
        ratios.append(ratio)
        fills.append(sum(items[i][1] for i in taken) / capacity)
        if worst is None or ratio < worst[0]:
            worst = (ratio, k)
    return {
        "combined_score": sum(ratios) / len(ratios),
        "tests": ratios,
        "features": {"worst_ratio": min(ratios), "fill": sum(fills) / len(fills)},
        "artifacts": {"feedback": f"worst instance: #{worst[1]} reached {worst[0]:.3f} of the optimum"},
    }
