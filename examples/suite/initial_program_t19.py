"""Suite target t19: EXPR must reproduce the target's examples (examples/suite/targets.json)."""

TARGET = "t19"

# EVOLVE-BLOCK-START
EXPR = "x"
# EVOLVE-BLOCK-END
