"""Suite target t14: EXPR must reproduce the target's examples (examples/suite/targets.json)."""

TARGET = "t14"

# EVOLVE-BLOCK-START
EXPR = "x"
# EVOLVE-BLOCK-END
