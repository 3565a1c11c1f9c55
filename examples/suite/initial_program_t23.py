"""Suite target t23: EXPR must reproduce the target's examples (examples/suite/targets.json)."""

TARGET = "t23"

# EVOLVE-BLOCK-START
EXPR = "x"
# EVOLVE-BLOCK-END
