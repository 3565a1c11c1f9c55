"""Evaluator for integer-function synthesis: f(x) = 3x + 1 from five examples.

Visible tests: the five examples in the prompt (x = 0, 1, 2, 3, 5), reported as the
per-test vector ``tests``; ``combined_score`` is their mean. Hidden tests (x = -3, 4, 7, 10,
25) only enter ``hidden_pass_rate``. The expression is evaluated with a whitelist over
Python's AST (integers, x, +, -, *, parentheses; at most 9 characters; magnitudes bounded):
never with ``eval``. Features: the expression's length and its number of multiplications,
so MAP-Elites keeps differently shaped programs (x+x+x+1 next to 3*x+1 and x*3+1).
``artifacts["outputs"]``: the expression's values on ``PROBES``, the behaviour the
``semantic`` cluster hashes (x+x+2, 2*x+2 and (x+1)*2 share a key; x+1 and x+2 do not).
"""

import ast
import importlib.util

VISIBLE = [(0, 1), (1, 4), (2, 7), (3, 10), (5, 16)]
PROBES = (-7, -2, 0, 1, 3, 6, 11, 20)  # outputs here tell programs apart (the semantic cluster)
HIDDEN = [(-3, -8), (4, 13), (7, 22), (10, 31), (25, 76)]
MAX_LEN = 9
LIMIT = 10**9


class BadExpression(ValueError):
    pass


def _value(node, x):
    if isinstance(node, ast.Expression):
        return _value(node.body, x)
    if isinstance(node, ast.Name) and node.id == "x":
        return x
    if isinstance(node, ast.Constant) and type(node.value) is int:
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
    if not text or len(text) > MAX_LEN or set(text) - set("x0123456789+-*()"):
        raise BadExpression(f"{text!r} is not a DSL expression of at most {MAX_LEN} characters")
    try:
        return ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise BadExpression(f"syntax error: {exc.msg}") from None


def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("candidate_program", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = str(module.EXPR).replace(" ", "")
    try:
        tree = compile_expression(text)
        tests = [1.0 if _value(tree, x) == y else 0.0 for x, y in VISIBLE]
        hidden = [1.0 if _value(tree, x) == y else 0.0 for x, y in HIDDEN]
    except BadExpression as exc:
        return {"combined_score": 0.0, "tests": [0.0] * len(VISIBLE), "hidden_pass_rate": 0.0,
                "features": {"length": float(min(len(text), MAX_LEN)), "multiplications": 0.0},
                "artifacts": {"error": str(exc), "outputs": "invalid"}}
    return {
        "combined_score": sum(tests) / len(tests),
        "tests": tests,
        "hidden_pass_rate": sum(hidden) / len(hidden),
        "features": {"length": float(len(text)), "multiplications": float(text.count("*"))},
        "artifacts": {"expression": text, "outputs": ",".join(str(_value(tree, x)) for x in PROBES)},
    }
