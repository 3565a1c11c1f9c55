"""Suite target t20: EXPR must reproduce the target's examples (examples/suite/targets.json)."""

TARGET = "t20"

# EVOLVE-BLOCK-START
EXPR = "x"
# EVOLVE-BLOCK-END
