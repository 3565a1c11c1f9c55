"""Suite target t38: EXPR must reproduce the target's examples (examples/suite/targets.json)."""

TARGET = "t38"

# EVOLVE-BLOCK-START
EXPR = "x"
# EVOLVE-BLOCK-END
