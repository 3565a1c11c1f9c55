"""Evaluator of the problem suite: one program = one target's EXPR.

A program names its target (``TARGET = "t05"``, outside the EVOLVE-BLOCK, so every child
keeps its parent's target) and holds an expression ``EXPR`` of the integer DSL (atoms x, 1,
2, 3; operators +, -, *; parentheses; at most 9 characters), checked by a whitelist over
Python's AST and never executed. The targets are ``TARGETS`` below (the suite's
training targets; the held-out targets are not in this example). Each target shows its two
``examples``; with ``EXAMPLES_PER_TARGET = 3`` it also shows ``third`` (the first input in
0..5 not yet shown, with its reference's output; ``benchmarks/bench_suite.py --examples 3``),
so fewer semantic classes pass and a half-solution is a third. Reported:

* ``error`` when ``EXPR`` is not an expression of the DSL (the status becomes ``error``: such
  a child never enters the archive, and ``train.shaping.error`` can price it);
* ``tests``: one pass bit per example of the target (partial credit; the VPO reward vector);
  ``combined_score``: their mean;
* features ``target`` (the target's index: one archive column per target) and ``length``;
* artifacts ``examples`` (the target's examples as the policy's prompt shows them,
  ``0>1,1>3,...``; the prompt template reads it as ``{artifact[examples]}``), ``target``,
  ``expression`` and ``outputs`` (values on x = -4..11: the semantic class).
"""

import ast
import importlib.util

TARGETS = [  # the suite's training targets (qdevolve/rl/tasks/suite_targets.json), written by benchmarks/suite_calibrate.py
    {"name": "t00", "examples": [[0, 1], [2, 1]], "third": [1, 2], "reference": "1+x*(2-x)", "classes": 3, "base_pass1": 0.16016},
    {"name": "t01", "examples": [[0, 2], [1, 2]], "third": [2, 2], "reference": "2", "classes": 4, "base_pass1": 0.09766},
    {"name": "t03", "examples": [[0, 0], [2, 4]], "third": [1, 2], "reference": "x*(3-x)*x", "classes": 8, "base_pass1": 0.07031},
    {"name": "t04", "examples": [[0, 0], [2, 0]], "third": [1, 2], "reference": "2*(2-x)*x", "classes": 9, "base_pass1": 0.05078},
    {"name": "t05", "examples": [[0, 0], [1, 3]], "third": [2, 48], "reference": "x*x*x*x*3", "classes": 12, "base_pass1": 0.03906},
    {"name": "t06", "examples": [[0, 0], [1, 2]], "third": [2, 0], "reference": "2*(2-x)*x", "classes": 14, "base_pass1": 0.03516},
    {"name": "t08", "examples": [[1, 4], [2, 4]], "third": [0, 0], "reference": "(3-x)*2*x", "classes": 3, "base_pass1": 0.02734},
    {"name": "t09", "examples": [[1, -2], [3, 0]], "third": [0, -3], "reference": "x-3", "classes": 3, "base_pass1": 0.02734},
    {"name": "t10", "examples": [[0, -1], [1, -1]], "third": [2, -1], "reference": "x-1-x", "classes": 3, "base_pass1": 0.02734},
    {"name": "t11", "examples": [[0, -3], [1, -2]], "third": [2, -1], "reference": "x-3", "classes": 5, "base_pass1": 0.02344},
    {"name": "t13", "examples": [[0, -2], [1, -1]], "third": [2, 0], "reference": "x+x-1*2-x", "classes": 4, "base_pass1": 0.01953},
    {"name": "t14", "examples": [[0, 0], [3, 0]], "third": [1, -4], "reference": "(x-3)*x*2", "classes": 9, "base_pass1": 0.01953},
    {"name": "t15", "examples": [[0, 2], [1, 1]], "third": [2, 2], "reference": "2-x*(2-x)", "classes": 6, "base_pass1": 0.01953},
    {"name": "t16", "examples": [[0, -3], [2, -3]], "third": [1, -3], "reference": "x-3-x", "classes": 3, "base_pass1": 0.01172},
    {"name": "t18", "examples": [[0, -2], [1, -2]], "third": [2, -2], "reference": "x-2-x", "classes": 4, "base_pass1": 0.00781},
    {"name": "t19", "examples": [[0, 0], [2, 8]], "third": [1, 5], "reference": "x*(3-x+3)", "classes": 6, "base_pass1": 0.00781},
    {"name": "t20", "examples": [[0, 1], [1, 0]], "third": [2, -5], "reference": "x+1-x*x*2", "classes": 6, "base_pass1": 0.00781},
    {"name": "t21", "examples": [[0, 0], [1, -2]], "third": [2, -2], "reference": "(x-3)*x", "classes": 9, "base_pass1": 0.00391},
    {"name": "t23", "examples": [[0, 0], [1, -1]], "third": [2, -8], "reference": "1-1-x*x*x", "classes": 10, "base_pass1": 0.00391},
    {"name": "t24", "examples": [[0, 0], [1, 4]], "third": [2, 26], "reference": "x*x*x*3+x", "classes": 11, "base_pass1": 0.00391},
    {"name": "t25", "examples": [[0, 1], [1, 2]], "third": [2, 1], "reference": "1+x*(2-x)", "classes": 6, "base_pass1": 0.00391},
    {"name": "t26", "examples": [[0, 3], [1, 5]], "third": [2, 5], "reference": "3*x-x*x+3", "classes": 6, "base_pass1": 0.00391},
    {"name": "t28", "examples": [[0, 0], [3, 18]], "third": [1, 2], "reference": "1*x*x*2", "classes": 7, "base_pass1": 0.00313},
    {"name": "t29", "examples": [[0, 0], [2, -2]], "third": [1, -2], "reference": "(x-3)*x", "classes": 5, "base_pass1": 0.00234},
    {"name": "t30", "examples": [[0, 1], [1, -1]], "third": [2, -5], "reference": "1-x*(1+x)", "classes": 6, "base_pass1": 0.00156},
    {"name": "t31", "examples": [[0, -1], [1, -2]], "third": [2, -1], "reference": "x*x-1-x*2", "classes": 5, "base_pass1": 0.00156},
    {"name": "t33", "examples": [[0, 0], [5, -30]], "third": [1, -6], "reference": "(x-x*3)*3", "classes": 4, "base_pass1": 0.00078},
    {"name": "t34", "examples": [[0, 4], [1, 5]], "third": [2, 12], "reference": "1+3+x*x*x", "classes": 3, "base_pass1": 0.00078},
    {"name": "t35", "examples": [[1, -4], [4, 8]], "third": [0, 0], "reference": "(x-3)*x*2", "classes": 3, "base_pass1": 0.0},
    {"name": "t36", "examples": [[2, 4], [3, 0]], "third": [0, 6], "reference": "3*2-x*x+x", "classes": 4, "base_pass1": 0.0},
    {"name": "t38", "examples": [[0, -2], [1, -4]], "third": [2, -6], "reference": "1-(3+x*2)", "classes": 3, "base_pass1": 0.0},
    {"name": "t39", "examples": [[0, 0], [3, -21]], "third": [1, 1], "reference": "x*(2-x*x)", "classes": 3, "base_pass1": 0.0},
]
INDEX = {t["name"]: i for i, t in enumerate(TARGETS)}
EXAMPLES_PER_TARGET = 2  # 2, or 3: each target's examples plus its 'third'
if EXAMPLES_PER_TARGET not in (2, 3):
    raise ValueError(f"EXAMPLES_PER_TARGET must be 2 or 3, got {EXAMPLES_PER_TARGET}")
PROBES = tuple(range(-4, 12))
MAX_LEN = 9
LIMIT = 10**9


class BadExpression(ValueError):
    pass


def _value(node, x):
    if isinstance(node, ast.Expression):
        return _value(node.body, x)
    if isinstance(node, ast.Name) and node.id == "x":
        return x
    if isinstance(node, ast.Constant) and type(node.value) is int and node.value in (1, 2, 3):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
        a, b = _value(node.left, x), _value(node.right, x)
        out = a + b if isinstance(node.op, ast.Add) else a - b if isinstance(node.op, ast.Sub) else a * b
        if abs(out) > LIMIT:
            raise BadExpression("value out of range")
        return out
    raise BadExpression(f"not allowed in the DSL: {type(node).__name__}")


def compile_expression(text):
    text = text.replace(" ", "")
    if not text or len(text) > MAX_LEN or set(text) - set("x123+-*()"):
        raise BadExpression(f"{text!r} is not a DSL expression of at most {MAX_LEN} characters")
    try:
        return ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise BadExpression(f"syntax error: {exc.msg}") from None


def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("candidate_program", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    name = str(module.TARGET)
    if name not in INDEX:
        raise ValueError(f"{program_path}: TARGET {name!r} is not a suite target ({', '.join(INDEX)})")
    target = TARGETS[INDEX[name]]
    examples = [tuple(p) for p in target["examples"]] + ([tuple(target["third"])] if EXAMPLES_PER_TARGET == 3 else [])
    shown = ",".join(f"{x}>{y}" for x, y in examples)
    text = str(module.EXPR).replace(" ", "")
    feats = {"target": float(INDEX[name]), "length": float(min(max(len(text), 1), MAX_LEN))}
    try:
        tree = compile_expression(text)
        tests = [1.0 if _value(tree, x) == y else 0.0 for x, y in examples]
        outputs = [_value(tree, x) for x in PROBES]
    except BadExpression as exc:
        # not a program of the DSL: a failed evaluation (status 'error'), never an archive entry
        return {"combined_score": 0.0, "error": str(exc), "tests": [0.0] * len(examples), "features": feats,
                "artifacts": {"examples": shown, "target": name}}
    return {"combined_score": sum(tests) / len(tests), "tests": tests, "features": feats,
            "artifacts": {"examples": shown, "target": name, "expression": text, "outputs": outputs}}
