"""Suite target t35: EXPR must reproduce the target's examples (examples/suite/targets.json)."""

TARGET = "t35"

# EVOLVE-BLOCK-START
EXPR = "x"
# EVOLVE-BLOCK-END
