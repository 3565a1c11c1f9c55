"""Suite target t21: EXPR must reproduce the target's examples (examples/suite/targets.json)."""

TARGET = "t21"

# EVOLVE-BLOCK-START
EXPR = "x"
# EVOLVE-BLOCK-END
