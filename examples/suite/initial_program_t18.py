"""Suite target t18: EXPR must reproduce the target's examples (examples/suite/targets.json)."""

TARGET = "t18"

# EVOLVE-BLOCK-START
EXPR = "x"
# EVOLVE-BLOCK-END
