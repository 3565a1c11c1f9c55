"""Suite target t03: EXPR must reproduce the target's examples (examples/suite/targets.json)."""

TARGET = "t03"

# EVOLVE-BLOCK-START
EXPR = "x"
# EVOLVE-BLOCK-END
