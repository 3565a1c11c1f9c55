"""``eval-policy``'s version selection and the store method its results go through."""

from __future__ import annotations

from pathlib import Path

import pytest

from qdevolve.cli.train import parse_versions
from qdevolve.db.store import LineageStore
from qdevolve.errors import ConfigError, DatabaseError


def test_versions_parse_with_or_without_v() -> None:
    assert parse_versions("v8,v0, 4,v4") == [0, 4, 8]
    assert parse_versions(None) is None
    for bad in ("v1,x", ",", "vv"):
        with pytest.raises(ConfigError, match="--versions"):
            parse_versions(bad)


def test_one_selection_at_a_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from qdevolve.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["eval-policy", "--task", "few_answer", "--db", str(tmp_path / "x.sqlite"), "--all", "--versions", "v0"])
    assert exc.value.code == 2 and "one of --policy-version, --versions, --all" in capsys.readouterr().err


def test_record_policy_eval_merges_by_key_and_refuses_a_missing_version(tmp_path: Path) -> None:
    store = LineageStore(tmp_path / "s.sqlite", create=True)
    rid = store.create_run(name="t")
    store.add_policy_version(rid, 0, objective="grpo", metrics={"loss": 0.1})
    store.record_policy_eval(rid, 0, "a", {"metrics": {"pass@1": 0.5}})
    store.record_policy_eval(rid, 0, "b", {"metrics": {"pass@1": 0.25}})
    store.record_policy_eval(rid, 0, "a", {"metrics": {"pass@1": 0.75}})
    metrics = store.policy_versions(rid)[0]["metrics"]
    assert metrics == {"loss": 0.1, "evals": {"a": {"metrics": {"pass@1": 0.75}}, "b": {"metrics": {"pass@1": 0.25}}}}
    with pytest.raises(DatabaseError, match="no policy version 3"):
        store.record_policy_eval(rid, 3, "a", {})
    store.close()
