"""Parent selection (plugin kind ``selection``) and inspiration sampling.

Built-ins (each documents its formula and source): ``uniform``, ``tournament``, ``dgm``,
``power_law``, ``novelty_weighted``, ``best_child`` (PUCT over the best child produced),
``openevolve`` (OpenEvolve's exploration/exploitation mixture), ``hgm`` (Huxley-Gödel
Machine: Thompson sampling over clade statistics) and ``greedy`` (always the latest best;
DGM's ablation). A rule is any object with
``select(candidates: Sequence[Elite], rng, n=1) -> list[Elite]``.
"""

from __future__ import annotations

from qdevolve.selection.best_child import BestChildSelection
from qdevolve.selection.crowded import CrowdedTournamentSelection
from qdevolve.selection.greedy import GreedySelection
from qdevolve.selection.hgm import HGMSelection
from qdevolve.selection.inspirations import sample_inspirations
from qdevolve.selection.openevolve_mix import OpenEvolveSelection
from qdevolve.selection.rules import (
    DGMSelection,
    NoveltyWeightedSelection,
    PowerLawSelection,
    SelectionRule,
    TournamentSelection,
    UniformSelection,
)

__all__ = [
    "SelectionRule",
    "UniformSelection",
    "TournamentSelection",
    "DGMSelection",
    "PowerLawSelection",
    "NoveltyWeightedSelection",
    "BestChildSelection",
    "OpenEvolveSelection",
    "HGMSelection",
    "GreedySelection",
    "CrowdedTournamentSelection",
    "sample_inspirations",
]
