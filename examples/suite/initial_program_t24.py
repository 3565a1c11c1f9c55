"""Suite target t24: EXPR must reproduce the target's examples (examples/suite/targets.json)."""

TARGET = "t24"

# EVOLVE-BLOCK-START
EXPR = "x"
# EVOLVE-BLOCK-END
