"""Suite target t05: EXPR must reproduce the target's examples (examples/suite/targets.json)."""

TARGET = "t05"

# EVOLVE-BLOCK-START
EXPR = "x"
# EVOLVE-BLOCK-END
