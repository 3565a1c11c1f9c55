"""Evaluator of the online bin-packing example.

Runs the candidate's ``pack`` on the eight instances of ``instances.json`` (a data file
beside this evaluator, read relative to ``__file__``), checks every assignment itself (no
bin over capacity, every item placed) and scores each instance by ``lower bound / bins
used``, where the lower bound is ``ceil(sum of sizes)``: 1.0 would be a perfect packing.

Returns ``combined_score`` (the mean ratio), ``tests`` (the ratio per instance, in [0, 1]),
two behaviour descriptors for MAP-Elites (``fill_spread``: the standard deviation of the
final bin fills; ``best_fit_agreement``: how often the candidate chose the bin a best-fit
packer would have), a few metrics and a feedback text for the prompt.
"""

import importlib.util
import json
import math
from pathlib import Path

DATA = json.loads((Path(__file__).parent / "instances.json").read_text())
CAPACITY = float(DATA["capacity"])


def load(program_path):
    spec = importlib.util.spec_from_file_location("candidate", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check(items, assignment):
    """The final fill of each bin, or ValueError naming what is wrong with ``assignment``."""
    if not isinstance(assignment, list) or len(assignment) != len(items):
        raise ValueError(f"pack() must return one bin index per item ({len(items)}), got {type(assignment).__name__}")
    fills = []
    for i, (item, b) in enumerate(zip(items, assignment, strict=True)):
        if type(b) is not int or not 0 <= b <= len(fills):
            raise ValueError(f"item {i}: bin {b!r} is neither an open bin nor the next new one")
        if b == len(fills):
            fills.append(0.0)
        fills[b] += item
        if fills[b] > CAPACITY + 1e-9:
            raise ValueError(f"item {i} overfills bin {b} ({fills[b]:.3f} > {CAPACITY})")
    return fills


def best_fit_agreement(items, assignment):
    """Fraction of placements where the chosen bin is the tightest one the item fits in."""
    fills, same = [], 0
    for item, b in zip(items, assignment, strict=True):
        fitting = [(CAPACITY - f - item, k) for k, f in enumerate(fills) if item <= CAPACITY - f + 1e-9]
        tightest = min(fitting)[1] if fitting else len(fills)
        same += b == tightest
        if b == len(fills):
            fills.append(0.0)
        fills[b] += item
    return same / len(items)


def evaluate(program_path):
    program = load(program_path)
    ratios, spreads, agreements, used, worst = [], [], [], 0, None
    for inst in DATA["instances"]:
        items = inst["items"]
        assignment = program.pack(items)  # runs in the candidate's process; plain data comes back
        fills = check(items, assignment)
        bound = math.ceil(sum(items) / CAPACITY - 1e-9)
        ratio = bound / len(fills)
        ratios.append(ratio)
        used += len(fills)
        mean = sum(fills) / len(fills)
        spreads.append(math.sqrt(sum((f - mean) ** 2 for f in fills) / len(fills)))
        agreements.append(best_fit_agreement(items, assignment))
        if worst is None or ratio < worst[0]:
            worst = (ratio, inst["name"], len(fills), bound)
    return {
        "combined_score": sum(ratios) / len(ratios),
        "tests": ratios,
        "features": {"fill_spread": sum(spreads) / len(spreads),
                     "best_fit_agreement": sum(agreements) / len(agreements)},
        "bins_used": float(used),
        "artifacts": {"feedback": f"worst instance: {worst[1]} used {worst[2]} bins, lower bound {worst[3]}"},
    }
