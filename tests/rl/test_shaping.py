"""Graded rewards for lazy, duplicate and failed children (qdevolve.rl.shaping)."""

from __future__ import annotations

import pytest

from qdevolve.errors import ConfigError
from qdevolve.rl.shaping import PRESETS, RewardShaping, child_kind
from qdevolve.types import code_hash

PARENT = 'EXPR = "x+1"\n'


def test_child_kind_order() -> None:
    stored = {code_hash('EXPR = "3*x"\n'), code_hash(PARENT)}
    assert child_kind(code=None) == "no_program"
    assert child_kind(code="") == "no_program"
    # a copy of the parent is lazy even though it is also stored; comments do not count
    assert child_kind(code='EXPR = "x+1"  # same\n', parent_codes=[PARENT], stored_hashes=stored) == "lazy"
    assert child_kind(code='EXPR = "3*x"\n', parent_codes=[PARENT], stored_hashes=stored) == "duplicate"
    assert child_kind(code='EXPR = "x+2"\n', parent_codes=[PARENT], stored_hashes=stored, status="timeout") == "timeout"
    assert child_kind(code='EXPR = "x+2"\n', parent_codes=[PARENT], stored_hashes=stored) == "ok"


def test_shaping_replaces_rewards_by_kind_and_is_identity_by_default() -> None:
    off = RewardShaping()
    assert not off.enabled and off(0.6, "lazy") == 0.6 and off(0.6, "ok") == 0.6
    theta = RewardShaping.from_dict({"preset": "thetaevolve"})
    assert theta(0.6, "no_program") == -0.4 and theta(0.6, "lazy") == -0.3 and theta(0.6, "error") == -0.2
    assert theta(0.6, "invalid") == -0.1 and theta(0.6, "ok") == 0.6
    mixed = RewardShaping.from_dict({"preset": "thetaevolve", "duplicate": -0.05})
    assert mixed(1.0, "duplicate") == -0.05 and mixed(1.0, "lazy") == PRESETS["thetaevolve"]["lazy"]
    only = RewardShaping.from_dict({"lazy": -1})
    assert only(0.8, "lazy") == -1.0 and only(0.8, "duplicate") == 0.8
    with pytest.raises(ValueError, match="unknown child kind"):
        only(0.8, "weird")


@pytest.mark.parametrize(("spec", "message"), [
    ({"lazzy": -0.3}, r"train\.shaping: unknown key\(s\) lazzy"),
    ({"preset": "nope"}, r"train\.shaping\.preset: unknown preset 'nope'"),
    ({"lazy": "a lot"}, r"train\.shaping\.lazy: expected a number"),
])
def test_bad_config_is_one_clear_error(spec: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        RewardShaping.from_dict(spec)
