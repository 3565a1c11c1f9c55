"""Suite target t04: EXPR must reproduce the target's examples (examples/suite/targets.json)."""

TARGET = "t04"

# EVOLVE-BLOCK-START
EXPR = "x"
# EVOLVE-BLOCK-END
