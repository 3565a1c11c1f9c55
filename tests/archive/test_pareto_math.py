"""NSGA-II ranks and crowding distances, and the lexicographic order, on hand-computed cases."""

from __future__ import annotations

import math

import pytest

from qdevolve.archive.pareto_math import (
    crowding_distances,
    dominates,
    lexicographic_ranks,
    non_dominated_ranks,
    signed,
)

INF = math.inf


def test_dominance_needs_one_strictly_better_and_none_worse() -> None:
    assert dominates((2, 4), (2, 3)) and dominates((3, 3), (2, 2))
    assert not dominates((2, 4), (2, 4)), "equal vectors dominate neither way"
    assert not dominates((1, 5), (2, 4)) and not dominates((2, 4), (1, 5))


def test_signed_negates_minimised_objectives_in_declared_order() -> None:
    assert signed({"len": 10.0, "acc": 0.5}, {"acc": "max", "len": "min"}) == (0.5, -10.0)


def test_non_dominated_ranks() -> None:
    # A..D are mutually non-dominated; G equals C; E is beaten by B and C; F only by E (and all above)
    pts = [(1, 5), (2, 4), (3, 3), (4, 1), (2, 2), (1, 1), (3, 3)]
    assert non_dominated_ranks(pts) == [0, 0, 0, 0, 1, 2, 0]
    assert non_dominated_ranks([(0, 0), (1, 1), (2, 2)]) == [2, 1, 0], "a chain: one front each"
    assert non_dominated_ranks([]) == []


def test_crowding_distances_by_hand() -> None:
    # x spans 1..4 (3), y spans 1..5 (4); (2,4): x neighbours 1 and 3 -> 2/3, y neighbours 3 and 5 -> 2/4
    # (3,3): x neighbours 2 and 4 -> 2/3, y neighbours 1 and 4 -> 3/4; the ends of each axis are infinite
    got = crowding_distances([(1, 5), (2, 4), (3, 3), (4, 1)])
    assert got == pytest.approx([INF, 2 / 3 + 2 / 4, 2 / 3 + 3 / 4, INF])
    # an objective equal on the whole front adds nothing (and makes no end infinite)
    assert crowding_distances([(1, 2), (2, 2), (3, 2)]) == pytest.approx([INF, 1.0, INF])
    assert crowding_distances([(0, 1), (1, 0)]) == [INF, INF]
    assert crowding_distances([]) == []


def test_lexicographic_ranks_first_component_decides_then_the_next() -> None:
    # sorted best first: (1,3) (1,3) (1,2) (0,9); equal vectors share their place
    assert lexicographic_ranks([(1, 2), (1, 3), (0, 9), (1, 3)]) == [2, 0, 3, 0]
