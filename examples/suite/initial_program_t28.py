"""Suite target t28: EXPR must reproduce the target's examples (examples/suite/targets.json)."""

TARGET = "t28"

# EVOLVE-BLOCK-START
EXPR = "x"
# EVOLVE-BLOCK-END
