"""Suite target t08: EXPR must reproduce the target's examples (examples/suite/targets.json)."""

TARGET = "t08"

# EVOLVE-BLOCK-START
EXPR = "x"
# EVOLVE-BLOCK-END
