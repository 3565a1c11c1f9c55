"""Evaluator of the problem suite: one program = one target's EXPR.

A program names its target (``TARGET = "t05"``, outside the EVOLVE-BLOCK, so every child
keeps its parent's target) and holds an expression ``EXPR`` of the integer DSL (atoms x, 1,
2, 3; operators +, -, *; parentheses; at most 9 characters), checked by a whitelist over
Python's AST and never executed. The targets are ``targets.json`` (the suite's training
targets; the held-out targets are not in this example). Reported:

* ``tests``: one pass bit per example of the target (partial credit; the VPO reward vector);
  ``combined_score``: their mean;
* features ``target`` (the target's index: one archive column per target) and ``length``;
* artifacts ``examples`` (the target's examples as the policy's prompt shows them,
  ``0>1,1>3,...``; the prompt template reads it as ``{artifact[examples]}``), ``target``,
  ``expression`` and ``outputs`` (values on x = -4..11: the semantic class).
"""

import ast
import importlib.util
import json
from pathlib import Path

TARGETS = json.loads((Path(__file__).resolve().parent / "targets.json").read_text())
INDEX = {t["name"]: i for i, t in enumerate(TARGETS)}
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
    examples = [tuple(p) for p in target["examples"]]
    shown = ",".join(f"{x}>{y}" for x, y in examples)
    text = str(module.EXPR).replace(" ", "")
    feats = {"target": float(INDEX[name]), "length": float(min(max(len(text), 1), MAX_LEN))}
    try:
        tree = compile_expression(text)
        tests = [1.0 if _value(tree, x) == y else 0.0 for x, y in examples]
        outputs = [_value(tree, x) for x in PROBES]
    except BadExpression as exc:
        return {"combined_score": 0.0, "tests": [0.0] * len(examples), "features": feats,
                "artifacts": {"examples": shown, "target": name, "error": str(exc)}}
    return {"combined_score": sum(tests) / len(tests), "tests": tests, "features": feats,
            "artifacts": {"examples": shown, "target": name, "expression": text, "outputs": outputs}}
