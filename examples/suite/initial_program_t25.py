"""Suite target t25: EXPR must reproduce the target's examples (examples/suite/targets.json)."""

TARGET = "t25"

# EVOLVE-BLOCK-START
EXPR = "x"
# EVOLVE-BLOCK-END
