"""Suite target t36: EXPR must reproduce the target's examples (examples/suite/targets.json)."""

TARGET = "t36"

# EVOLVE-BLOCK-START
EXPR = "x"
# EVOLVE-BLOCK-END
