"""Suite target t31: EXPR must reproduce the target's examples (examples/suite/targets.json)."""

TARGET = "t31"

# EVOLVE-BLOCK-START
EXPR = "x"
# EVOLVE-BLOCK-END
