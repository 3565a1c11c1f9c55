"""Suite target t16: EXPR must reproduce the target's examples (examples/suite/targets.json)."""

TARGET = "t16"

# EVOLVE-BLOCK-START
EXPR = "x"
# EVOLVE-BLOCK-END
