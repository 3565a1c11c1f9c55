"""Suite target t13: EXPR must reproduce the target's examples (examples/suite/targets.json)."""

TARGET = "t13"

# EVOLVE-BLOCK-START
EXPR = "x"
# EVOLVE-BLOCK-END
