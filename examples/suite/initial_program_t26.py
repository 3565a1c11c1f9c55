"""Suite target t26: EXPR must reproduce the target's examples (examples/suite/targets.json)."""

TARGET = "t26"

# EVOLVE-BLOCK-START
EXPR = "x"
# EVOLVE-BLOCK-END
