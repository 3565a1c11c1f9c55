"""Suite target t01: EXPR must reproduce the target's examples (examples/suite/targets.json)."""

TARGET = "t01"

# EVOLVE-BLOCK-START
EXPR = "x"
# EVOLVE-BLOCK-END
