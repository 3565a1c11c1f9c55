"""Suite target t33: EXPR must reproduce the target's examples (examples/suite/targets.json)."""

TARGET = "t33"

# EVOLVE-BLOCK-START
EXPR = "x"
# EVOLVE-BLOCK-END
