"""Suite target t06: EXPR must reproduce the target's examples (examples/suite/targets.json)."""

TARGET = "t06"

# EVOLVE-BLOCK-START
EXPR = "x"
# EVOLVE-BLOCK-END
