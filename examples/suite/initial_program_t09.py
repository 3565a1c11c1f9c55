"""Suite target t09: EXPR must reproduce the target's examples (examples/suite/targets.json)."""

TARGET = "t09"

# EVOLVE-BLOCK-START
EXPR = "x"
# EVOLVE-BLOCK-END
