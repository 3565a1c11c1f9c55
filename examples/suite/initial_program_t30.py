"""Suite target t30: EXPR must reproduce the target's examples (examples/suite/targets.json)."""

TARGET = "t30"

# EVOLVE-BLOCK-START
EXPR = "x"
# EVOLVE-BLOCK-END
