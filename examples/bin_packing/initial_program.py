"""Online bin packing: a priority function chooses the bin each arriving item goes to.

Items arrive one at a time (sizes in (0, 1], bins of capacity 1) and must be placed before
the next one is seen. ``pack`` offers the item every open bin it fits in, and a fresh
empty bin; the bin whose ``priority`` is highest receives it. Evolution rewrites
``priority``; ``pack`` is the fixed harness.
"""

# EVOLVE-BLOCK-START
def priority(item, remaining, fresh):
    """How much we want to put ``item`` in a bin with ``remaining`` room (``fresh``: an empty new bin)."""
    score = 0.5 * remaining - 0.4 * item
    if fresh:
        score = score - 1.0
    return score
# EVOLVE-BLOCK-END


def pack(items):
    """Place ``items`` in order; return the bin index of each item (bins numbered from 0)."""
    fills, assignment = [], []
    for item in items:
        choice, best = len(fills), priority(item, 1.0, True)
        for b, fill in enumerate(fills):
            rem = 1.0 - fill
            if item <= rem + 1e-9:
                p = priority(item, rem, False)
                if p > best:
                    choice, best = b, p
        if choice == len(fills):
            fills.append(0.0)
        fills[choice] += item
        assignment.append(choice)
    return assignment
