"""A mistyped config key or plugin option gets "did you mean ..." (difflib)."""

from __future__ import annotations

from pathlib import Path

import pytest

from qdevolve import registry
from qdevolve.errors import ConfigError, PluginError
from qdevolve.evolve.setup.example import load_example
from qdevolve.suggest import did_you_mean

from .conftest import CONFIG, write_example


def test_did_you_mean_finds_the_closest_name_or_nothing() -> None:
    assert did_you_mean(["wrokers"], ["workers", "seed"]) == "did you mean 'workers'?"
    assert did_you_mean(["MAX-EVALUATIONS"], ["max_evaluations"]) == "did you mean 'max_evaluations'?"
    assert did_you_mean(["zzzz"], ["workers", "seed"]) == ""
    two = did_you_mean(["sed", "wrokers"], ["workers", "seed"])
    assert "'seed' for 'sed'" in two and "'workers' for 'wrokers'" in two


CASES = {
    "run key": (CONFIG.replace("  workers: 1", "  wrokers: 1"), "did you mean 'workers'?"),
    "top-level key": (CONFIG.replace("archive:", "archvie:"), "did you mean 'archive'?"),
    "max_evaluations": (CONFIG.replace("  workers: 1", "  workers: 1\n  max_evaluation: 5"),
                        "did you mean 'max_evaluations'?"),
    "budget key": (CONFIG + "budget:\n  max_token: 5\n", "did you mean 'max_tokens'?"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_mistyped_config_key_suggests_the_right_one(case: str, tmp_path: Path) -> None:
    config, needle = CASES[case]
    ex = write_example(tmp_path / "ex", config=config)
    with pytest.raises(ConfigError) as info:
        load_example(ex)
    assert needle in str(info.value)
    assert "known keys" in str(info.value)


def test_mistyped_train_key_suggests_the_right_one() -> None:
    from qdevolve.evolve.training import TrainSettings

    with pytest.raises(ConfigError, match="did you mean 'objective'"):
        TrainSettings.from_dict({"policy": "tiny", "objectve": "ips"})


def test_mistyped_plugin_option_suggests_the_right_one() -> None:
    with pytest.raises(PluginError, match="did you mean 'bins'"):
        registry.archive.create({"type": "map_elites", "feature_dimensions": ["a"], "bnis": 3})
