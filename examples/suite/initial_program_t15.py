"""Suite target t15: EXPR must reproduce the target's examples (examples/suite/targets.json)."""

TARGET = "t15"

# EVOLVE-BLOCK-START
EXPR = "x"
# EVOLVE-BLOCK-END
