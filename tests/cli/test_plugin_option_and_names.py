"""One ``--plugin FILE`` on every command that resolves plugins; every task listed; policy
names never taken for paths (``tiny`` the built-in base, ``./tiny`` a folder)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from qdevolve.cli import cli
from qdevolve.errors import ConfigError
from qdevolve.evolve.setup import policy_path, policy_warnings
from qdevolve.evolve.setup.trust import host_keys
from qdevolve.rl.tasks import TASKS

PLUGIN_COMMANDS = [["run"], ["resume"], ["train"], ["eval-policy"], ["sandbox", "exec"], ["sandbox", "check"],
                   ["archive", "stats"], ["archive", "plot"], ["plugins", "list"]]


@pytest.mark.parametrize("command", PLUGIN_COMMANDS, ids=" ".join)
def test_every_plugin_command_takes_plugin_file(command: list[str]) -> None:
    r = CliRunner().invoke(cli, [*command, "--help"])
    assert r.exit_code == 0, r.output
    assert "--plugin FILE" in r.output


def test_sandbox_plugin_is_usable_as_backend(tmp_path: Path) -> None:
    plugin = tmp_path / "nobox.py"
    plugin.write_text("from qdevolve import registry\n")  # registers nothing: the name stays unknown
    r = CliRunner().invoke(cli, ["sandbox", "check", "--plugin", str(plugin), "--backend", "nobox"])
    assert r.exit_code != 0 and "no such sandbox" in str(r.exception) and "--plugin FILE" in str(r.exception)


def test_train_task_help_lists_every_task() -> None:
    r = CliRunner().invoke(cli, ["train", "--help"], terminal_width=400)
    for name in TASKS:
        assert name in r.output
    assert "--base-seed" in r.output


def test_run_has_cache_dir_base_seed_and_no_train() -> None:
    r = CliRunner().invoke(cli, ["run", "--help"])
    for flag in ("--cache-dir", "--base-seed", "--no-train"):
        assert flag in r.output


def test_tiny_is_the_builtin_even_beside_a_tiny_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tiny").mkdir()
    assert policy_path("tiny") is None
    assert policy_path("./tiny") == "./tiny" and policy_path("vllm:/models/m") == "/models/m"
    [warning] = policy_warnings("tiny")
    assert "built-in" in warning and "./tiny" in warning
    assert policy_warnings("./tiny") == []
    example = tmp_path / "example"
    example.mkdir()
    config = {"train": {"policy": "tiny"}, "backend": {"type": "transformers", "policy": "tiny"}}
    assert host_keys(config, example) == []  # no trust needed: it loads nothing from ./tiny
    keys = {k for k, _v, _why in host_keys({"train": {"policy": "./tiny"}}, example)}
    assert keys == {"train.policy"}  # the folder, outside the example directory: the user's call


def test_a_bare_name_that_is_no_builtin_policy_says_to_write_a_path(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mymodel").mkdir()
    with pytest.raises(ConfigError, match=r"'mymodel' is neither a built-in policy \(tiny\), a known model "
                       r"\(smollm2-135m-instruct\) nor a path.*\./mymodel"):
        policy_path("mymodel")
    assert policy_path("smollm2-135m-instruct") == "smollm2-135m-instruct"  # a known model is a name
    from qdevolve.evolve.training import TrainSettings

    with pytest.raises(ConfigError, match="train.policy"):
        TrainSettings.from_dict({"policy": "mymodel"})
    with pytest.raises(ConfigError, match="train.base_seed"):
        TrainSettings.from_dict({"base_seed": "1"})
    assert TrainSettings.from_dict({"enabled": False, "base_seed": 3}).base_seed == 3


def test_builtin_and_known_model_names_are_no_host_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``train.policy: tiny`` (or a known model's name) in an example's config names no file, even
    where the working directory holds a folder of that name; a path-shaped value still does."""
    from qdevolve.evolve.setup.host_walk import walk_host_keys

    example = tmp_path / "example"
    example.mkdir()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tiny").mkdir()
    (tmp_path / "smollm2-135m-instruct").mkdir()
    for name in ("tiny", "smollm2-135m-instruct"):
        assert walk_host_keys({"train": {"policy": name}}, example) == []
    found = walk_host_keys({"train": {"policy": "./tiny"}}, example)
    assert [k for k, _v, _why in found] == ["train.policy"]
