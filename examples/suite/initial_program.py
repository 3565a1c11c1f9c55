"""Suite target t00: EXPR must reproduce the target's examples (examples/suite/targets.json)."""

TARGET = "t00"

# EVOLVE-BLOCK-START
EXPR = "x"
# EVOLVE-BLOCK-END
