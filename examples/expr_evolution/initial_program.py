"""Integer-function synthesis: EXPR must reproduce the input/output examples in evaluator.py.

EXPR is an expression in a tiny DSL over the integer variable x: the atoms x, 1, 2, 3, the
operators +, - and *, and parentheses (at most 9 characters). The joined run samples the
expression from a tiny policy trained while the archive evolves.
"""

# EVOLVE-BLOCK-START
EXPR = "x+1"
# EVOLVE-BLOCK-END
