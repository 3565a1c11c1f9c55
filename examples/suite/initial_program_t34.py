"""Suite target t34: EXPR must reproduce the target's examples (examples/suite/targets.json)."""

TARGET = "t34"

# EVOLVE-BLOCK-START
EXPR = "x"
# EVOLVE-BLOCK-END
