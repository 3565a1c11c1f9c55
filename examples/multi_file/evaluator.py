"""Evaluator of the multi-file example (deterministic).

``program_path`` is the staged main file (``main.py``) of the evolved program tree; its
sibling ``heuristics.py`` lies beside it and ``main.py`` imports it. Score:
``combined_score = 1 / (1 + mean_i |solve(x_i) - target(x_i)|)`` over 41 points of [-1, 1]
with ``target(x) = 0.3 - 1.2 x + 0.8 x^2 + 0.4 x^3`` (in (0, 1]).

The metric ``tree_hash`` is the first 48 bits of the SHA-256 of every ``.py`` file beside
``program_path`` (names and bytes, sorted), so a test can check that the evaluator was
handed the evolved tree and not the seed.
"""

import hashlib
import importlib.util
import math
import os

XS = [-1.0 + i / 20 for i in range(41)]


def target(x):
    return 0.3 - 1.2 * x + 0.8 * x * x + 0.4 * x * x * x


def tree_hash(program_path):
    root = os.path.dirname(program_path)
    h = hashlib.sha256()
    for name in sorted(os.listdir(root)):
        if name.endswith(".py"):
            with open(os.path.join(root, name), "rb") as fh:
                h.update(name.encode() + b"\0" + fh.read() + b"\0")
    return float(int(h.hexdigest()[:12], 16))


def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("candidate_program", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ys = module.solve(XS)
    if len(ys) != len(XS):
        raise ValueError(f"solve returned {len(ys)} values for {len(XS)} points")
    err = 0.0
    for x, y in zip(XS, ys, strict=True):
        if isinstance(y, bool) or not isinstance(y, (int, float)) or not math.isfinite(y):
            raise ValueError(f"solve returned a non-number at x={x}: {y!r}")
        err += abs(y - target(x))
    return {"combined_score": 1.0 / (1.0 + err / len(XS)), "tree_hash": tree_hash(program_path)}
