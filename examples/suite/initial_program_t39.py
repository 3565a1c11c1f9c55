"""Suite target t39: EXPR must reproduce the target's examples (examples/suite/targets.json)."""

TARGET = "t39"

# EVOLVE-BLOCK-START
EXPR = "x"
# EVOLVE-BLOCK-END
