"""Inspiration sampling: the other programs a prompt shows next to the parent.

Like OpenEvolve's and AlphaEvolve's "double selection", inspirations are drawn separately
from the parent: the best programs (exploitation) plus random programs from other niches
(diversity). This module is pure (types and numpy only) so archives can use it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from qdevolve.types import Elite

__all__ = ["sample_inspirations"]


def sample_inspirations(candidates: Sequence[Elite], parent_id: str, rng: np.random.Generator, *,
                        n_best: int, n_diverse: int) -> list[Elite]:
    """The ``n_best`` highest-scoring candidates, then ``n_diverse`` random others.

    The diverse draws prefer cells not yet represented (neither the parent's nor a chosen
    one's); when those run out they fall back to any remaining candidate. The parent is
    never returned and no program appears twice.

    Args:
        candidates: Elites to draw from, in a deterministic order.
        parent_id: The parent's program id (excluded).
        rng: Random generator (only the diverse draws use it).
        n_best: How many top programs.
        n_diverse: How many random programs of other cells.

    Returns:
        Up to ``n_best + n_diverse`` elites, best first.
    """
    if n_best < 0 or n_diverse < 0:
        raise ValueError(f"n_best and n_diverse must be >= 0, got {n_best}, {n_diverse}")
    seen: set[str] = {parent_id}
    pool: list[Elite] = []
    for e in candidates:
        if e.program_id not in seen:
            seen.add(e.program_id)
            pool.append(e)
    parent_cells = {e.cell for e in candidates if e.program_id == parent_id}
    order = sorted(range(len(pool)), key=lambda i: (-pool[i].score, i))
    best = [pool[i] for i in order[:n_best]]
    chosen_ids = {e.program_id for e in best}
    used_cells = parent_cells | {e.cell for e in best}
    rest = [e for e in pool if e.program_id not in chosen_ids]
    fresh = [e for e in rest if e.cell is None or e.cell not in used_cells]
    diverse: list[Elite] = []
    for group in (fresh, rest):
        group = [e for e in group if e.program_id not in chosen_ids]
        k = min(n_diverse - len(diverse), len(group))
        if k <= 0:
            continue
        for i in sorted(rng.choice(len(group), size=k, replace=False).tolist()):
            diverse.append(group[i])
            chosen_ids.add(group[i].program_id)
    return best + diverse
