"""Greedy knapsack: a priority function decides which item goes into the bag next.

``pack`` repeatedly takes, among the items that still fit, the one whose ``priority`` is
highest. Evolution rewrites ``priority``; ``pack`` is the fixed harness.
"""

# EVOLVE-BLOCK-START
def priority(value, weight, room):
    """How much we want an item worth ``value`` that weighs ``weight`` when ``room`` is left.

    Higher is taken sooner. A good priority weighs the value against the weight.
    """
    return value
# EVOLVE-BLOCK-END


def pack(items, capacity):
    """Indices of the items packed, in the order taken (``items`` are (value, weight) pairs)."""
    room, left, taken = capacity, list(range(len(items))), []
    while True:
        fits = [i for i in left if items[i][1] <= room]
        if not fits:
            return taken
        best = max(fits, key=lambda i: priority(items[i][0], items[i][1], room))
        taken.append(best)
        left.remove(best)
        room -= items[best][1]
