"""Write instances.json: eight fixed online bin-packing instances (bins of capacity 1).

Deterministic (Python's own ``random.Random`` with fixed seeds), so the file can be
rebuilt and checked: ``python make_instances.py > instances.json``.
"""

import json
import random

SHAPES = {  # name: (seed, number of items, how one item size is drawn)
    "uniform_small": (1, 120, lambda r: r.uniform(0.05, 0.35)),
    "uniform_wide": (2, 100, lambda r: r.uniform(0.05, 0.75)),
    "uniform_large": (3, 80, lambda r: r.uniform(0.25, 0.7)),
    "triplets": (4, 120, lambda r: r.choice([0.25, 0.33, 0.42]) + r.uniform(-0.02, 0.02)),
    "bimodal": (5, 100, lambda r: r.uniform(0.05, 0.15) if r.random() < 0.6 else r.uniform(0.5, 0.7)),
    "halves": (6, 90, lambda r: r.uniform(0.45, 0.55) if r.random() < 0.5 else r.uniform(0.1, 0.3)),
    "weibull": (7, 110, lambda r: min(0.9, max(0.02, r.weibullvariate(0.25, 1.5)))),
    "thirds": (8, 120, lambda r: r.uniform(0.28, 0.38)),
}


def instances():
    out = []
    for name, (seed, n, draw) in SHAPES.items():
        rng = random.Random(seed)
        out.append({"name": name, "items": [round(draw(rng), 3) for _ in range(n)]})
    return {"capacity": 1.0, "instances": out}


if __name__ == "__main__":
    print(json.dumps(instances(), indent=1))
