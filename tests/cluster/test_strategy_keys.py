"""Strategy keys computed from the child itself: feature_cell, semantic, ast_hash."""

from __future__ import annotations

import numpy as np
import pytest

import qdevolve.cluster.ast_hash  # noqa: F401  (register before the entry points are installed)
import qdevolve.cluster.feature_cell  # noqa: F401
import qdevolve.cluster.semantic  # noqa: F401
from qdevolve import registry
from qdevolve.rl import RolloutGroup
from qdevolve.types import Program, Rollout


def make(name: str, **kwargs):
    return registry.cluster.create({"type": name, **kwargs})


@pytest.mark.parametrize("name,cls", [("feature_cell", "FeatureCellCluster"), ("semantic", "SemanticCluster"),
                                      ("ast_hash", "ASTHashCluster")])
def test_registered_under_declared_class(name, cls):
    obj = registry.cluster.get(name)
    assert obj.__name__ == cls and obj.__module__ == f"qdevolve.cluster.{name}"


# -- feature_cell ------------------------------------------------------------------------


def test_feature_cell_by_hand():
    key = make("feature_cell", features=["length", "multiplications"], ranges={"length": [0, 20]},
               bins={"length": 4})
    # length 7 in [0, 20) with 4 bins: floor((4 * 7 + 1e-6) / 20) = floor(1.4) = 1
    assert key(("x*x+1", {"features": {"length": 7, "multiplications": 1, "score": 0.3}})) == \
        "feat:length=1,multiplications=1"
    # 20 is clipped into the last bin (3), -5 into the first (0); unranged counts stay raw
    assert key(("", {"features": {"length": 20, "multiplications": 2}})) == "feat:length=3,multiplications=2"
    assert key(("", {"features": {"length": -5, "multiplications": 0}})) == "feat:length=0,multiplications=0"
    # a float feature without a range keeps its (rounded) value
    assert make("feature_cell", features=["ratio"])(("", {"features": {"ratio": 0.1 + 0.2}})) == "feat:ratio=0.3"


def test_feature_cell_does_not_need_the_archive():
    # two children in the same feature cell share a key whether or not either was admitted
    key = make("feature_cell", features=["length", "multiplications"])
    admitted = ("x*x", {"features": {"length": 3, "multiplications": 1}, "archive_cell": "3,1"})
    rejected = ("x*2", {"features": {"length": 3, "multiplications": 1}})
    other = ("x+x", {"features": {"length": 3, "multiplications": 0}})
    assert key(admitted) == key(rejected) != key(other)
    r = Rollout(prompt="p", completion="x*x", metadata={"features": {"length": 3, "multiplications": 1}})
    assert key(r) == key(rejected)


def test_feature_cell_missing_and_errors():
    key = make("feature_cell", features=["length"])
    assert key(("x", {})) == "feat:none"
    assert key(("x", {"features": {"other": 1}})) == "feat:none"
    with pytest.raises(ValueError, match="no feature 'length'"):
        make("feature_cell", features=["length"], missing=None)(("x", {"features": {"other": 1}}))
    with pytest.raises(ValueError, match="lo < hi"):
        make("feature_cell", ranges={"length": [5, 5]})
    with pytest.raises(ValueError, match="not in features"):
        make("feature_cell", features=["a"], ranges={"b": [0, 1]})
    with pytest.raises(ValueError, match="no entry"):
        make("feature_cell", ranges={"a": [0, 1]}, bins={"b": 2})


# -- semantic ----------------------------------------------------------------------------


def test_semantic_from_evaluator_outputs():
    key = make("semantic")
    a = key(("def f(x): return 2*x+2", {"outputs": [2, 4, 6.0000000001]}))
    b = key(("def g(y): return (y+1)*2", {"outputs": [2, 4, 6]}))
    c = key(("def h(x): return x*x", {"outputs": [0, 1, 4]}))
    assert a == b != c and a.startswith("sem:")
    assert key(("whatever", {})) == "sem:none"
    with pytest.raises(ValueError, match="no metadata"):
        make("semantic", missing=None)(("whatever", {}))


def test_semantic_with_a_dsl_probe():
    key = make("semantic", probe="qdevolve.rl.tasks.expr_dsl:semantic_key")
    # x+x+2, 2*x+2 and (x+1)*2 are one class; x*x+2 is another; the text is read from code
    assert key("x+x+2") == key("2*x+2") == key(("ignored", {"code": "(x+1)*2"})) != key("x*x+2")
    assert key("x+*") == "sem:invalid"  # the DSL parser rejects it (a ValueError)
    with pytest.raises(ValueError, match="cannot be imported"):
        make("semantic", probe="qdevolve.nowhere:f")
    with pytest.raises(ValueError, match="module:function"):
        make("semantic", probe="no_colon")


def test_semantic_keys_feed_ips_across_texts():
    key = make("semantic", probe="qdevolve.rl.tasks.expr_dsl:semantic_key")
    texts = ["x+x+2", "2*x+2", "(x+1)*2", "x*x+2"]
    g = RolloutGroup([1.0, 1.0, 1.0, 1.0], outcome_keys=[key(t) for t in texts])
    adv = registry.objective.create({"type": "ips"}).advantages(g)
    # three texts of one class share its count (3/4); the fourth is alone (1/4)
    assert adv[0] == adv[1] == adv[2] < 0 < adv[3]


# -- ast_hash ----------------------------------------------------------------------------


def test_ast_hash_alpha_renames_but_keeps_constants():
    key = make("ast_hash")
    a = key("def f(a, b):\n    total = a + b * 2\n    return total\n")
    b = key("def g(x, y):\n    '''doc'''\n    s = x + y * 2  # comment\n    return s\n")
    c = key("def f(a, b):\n    total = a + b * 3\n    return total\n")
    d = key("def f(a, b):\n    total = a + a * 2\n    return total\n")
    assert a == b and len({a, c, d}) == 3 and a.startswith("astn:")
    # free names (the DSL input x) and builtins are kept: x*2 and y*2 differ, 2*x and 3*x too
    assert key("x*2") != key("y*2") and key("2*x") != key("3*x")
    # ast_shape abstracts constants; ast_hash does not
    shape = registry.cluster.create({"type": "ast_shape"})
    assert shape("2*x") == shape("3*x")


def test_ast_hash_commutative_option_and_errors():
    assert make("ast_hash")("x*2+1") != make("ast_hash")("1+2*x")
    comm = make("ast_hash", commutative=True)
    assert comm("x*2+1") == comm("1+2*x") != comm("x*2-1")
    assert make("ast_hash")("def (") == "astn:invalid"
    with pytest.raises(ValueError, match="does not parse"):
        make("ast_hash", on_error=None)("def (")
    p = Program(code="def f(q):\n    return q + 1\n")
    assert make("ast_hash")(p) == make("ast_hash")("def g(z):\n    return z + 1\n")


def test_keys_build_rare_groups_from_rollouts():
    # children of one parent: the same semantic class twice (one correct, one partial), one other
    key = make("semantic", probe="qdevolve.rl.tasks.expr_dsl:semantic_key")
    rs = [Rollout(prompt="p", completion=t, reward=r, group_id="g") for t, r in
          [("x+x", 1.0), ("2*x", 1.0), ("x*x", 1.0), ("x+1", 0.0)]]
    g = RolloutGroup.from_rollouts(rs, cluster=key)
    assert g.cluster_keys[0] == g.cluster_keys[1] != g.cluster_keys[2]
    adv = registry.objective.create({"type": "rare"}).advantages(g)
    # positive advantages: the pair x+x / 2*x is divided by 2, the singleton x*x keeps weight 1
    assert np.isclose(adv[0] * 2, adv[2]) and adv[3] < 0
