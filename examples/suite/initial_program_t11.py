"""Suite target t11: EXPR must reproduce the target's examples (examples/suite/targets.json)."""

TARGET = "t11"

# EVOLVE-BLOCK-START
EXPR = "x"
# EVOLVE-BLOCK-END
