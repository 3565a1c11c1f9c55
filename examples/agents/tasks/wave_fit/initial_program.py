"""wave_fit: the amplitudes and offset of a wave (the constants are the answer)."""


# EVOLVE-BLOCK-START
def solve():
    a = 0.0
    b = 0.0
    c = 0.0
    return [a, b, c]
# EVOLVE-BLOCK-END
