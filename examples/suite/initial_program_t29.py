"""Suite target t29: EXPR must reproduce the target's examples (examples/suite/targets.json)."""

TARGET = "t29"

# EVOLVE-BLOCK-START
EXPR = "x"
# EVOLVE-BLOCK-END
