"""Evaluator of the two-objective sine example (deterministic).

Objectives (declared in config.yaml as ``objectives: {accuracy: max, length: min}``):

* ``accuracy = 1 / (1 + 10 * mean_i |approx(x_i) - sin(x_i)|)`` over 201 evenly spaced points
  of [-pi, pi], in (0, 1];
* ``length``: the characters of the program's EVOLVE-BLOCK that are not whitespace (the file
  is read as text for this count, never parsed or run; comments count too, so a program
  cannot look shorter than it is).

``combined_score`` (the scalar the summary's best score reads) is ``accuracy - length / 1000``.
A program whose ``approx`` returns a non-number is an error.
"""

import importlib.util
import math
from pathlib import Path

POINTS = [-math.pi + 2 * math.pi * i / 200 for i in range(201)]


START, END = "# EVOLVE-BLOCK-START", "# EVOLVE-BLOCK-END"


def _length(program_path):
    text = Path(program_path).read_text(encoding="utf-8")
    if text.count(START) != 1 or text.count(END) != 1 or text.index(START) > text.index(END):
        raise ValueError("the program must keep one EVOLVE-BLOCK")
    block = text[text.index(START) + len(START):text.index(END)]
    return sum(1 for ch in block if not ch.isspace())


def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("candidate_program", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    err = 0.0
    for x in POINTS:
        y = module.approx(x)
        if isinstance(y, bool) or not isinstance(y, (int, float)) or not math.isfinite(y):
            return {"error": f"approx({x:.3f}) returned {y!r}, not a finite number"}
        err += abs(y - math.sin(x))
    err /= len(POINTS)
    accuracy = 1.0 / (1.0 + 10.0 * err)
    length = float(_length(program_path))
    return {"combined_score": accuracy - length / 1000.0, "accuracy": accuracy, "length": length,
            "mean_abs_error": err}
