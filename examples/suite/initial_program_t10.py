"""Suite target t10: EXPR must reproduce the target's examples (examples/suite/targets.json)."""

TARGET = "t10"

# EVOLVE-BLOCK-START
EXPR = "x"
# EVOLVE-BLOCK-END
